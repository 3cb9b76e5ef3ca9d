from typing import Any, Optional, Sequence, Tuple, TypeVar, Union

from ._parenchyma import Backend

_T = TypeVar("_T")
_Pair = Union[int, Tuple[int, int], Sequence[int]]
_Algo = Union[str, int]

def sigmoid(backend: Backend, x: Any, y: _T) -> _T: ...
def sigmoid_pointwise(backend: Backend, x: _T) -> _T: ...
def sigmoid_grad(backend: Backend, y: Any, dy: Any, dx: _T) -> _T: ...
def sigmoid_pointwise_grad(backend: Backend, y: Any, d: _T) -> _T: ...
def relu(backend: Backend, x: Any, y: _T) -> _T: ...
def relu_pointwise(backend: Backend, x: _T) -> _T: ...
def relu_grad(backend: Backend, y: Any, dy: Any, dx: _T) -> _T: ...
def relu_pointwise_grad(backend: Backend, y: Any, d: _T) -> _T: ...
def tanh(backend: Backend, x: Any, y: _T) -> _T: ...
def tanh_pointwise(backend: Backend, x: _T) -> _T: ...
def tanh_grad(backend: Backend, y: Any, dy: Any, dx: _T) -> _T: ...
def tanh_pointwise_grad(backend: Backend, y: Any, d: _T) -> _T: ...
def elu(backend: Backend, x: Any, y: _T, alpha: float = 1.0) -> _T: ...
def elu_pointwise(backend: Backend, x: _T, alpha: float = 1.0) -> _T: ...
def elu_grad(backend: Backend, y: Any, dy: Any, dx: _T, alpha: float = 1.0) -> _T: ...
def elu_pointwise_grad(backend: Backend, y: Any, d: _T, alpha: float = 1.0) -> _T: ...
def softmax(backend: Backend, x: Any, y: _T, axis: int = -1) -> _T: ...
def softmax_grad(backend: Backend, y: Any, dy: Any, dx: _T, axis: int = -1) -> _T: ...
def log_softmax(backend: Backend, x: Any, y: _T, axis: int = -1) -> _T: ...
def log_softmax_grad(backend: Backend, y: Any, dy: Any, dx: _T, axis: int = -1) -> _T: ...

class Convolution:
    def __init__(
        self,
        backend: Backend,
        x_shape: Sequence[int],
        w_shape: Sequence[int],
        *,
        stride: _Pair = 1,
        padding: _Pair = 0,
        dilation: _Pair = 1,
        groups: int = 1,
        algorithm: Union[_Algo, Tuple[_Algo, _Algo, _Algo]] = "auto",
        math: str = "by_setting",
        training: bool = True,
        dtype: Any = "float32",
    ) -> None: ...
    @property
    def y_shape(self) -> Tuple[int, ...]: ...
    @property
    def x_shape(self) -> Tuple[int, ...]: ...
    @property
    def w_shape(self) -> Tuple[int, ...]: ...
    @property
    def backend(self) -> Backend: ...
    @property
    def dtype(self) -> str: ...
    def __repr__(self) -> str: ...
    def algorithm(self, direction: str = "forward") -> int: ...
    def workspace_bytes(self, direction: str = "forward") -> int: ...
    def forward(self, x: Any, w: Any, y: _T, bias: Optional[Any] = None) -> _T: ...
    def grad_data(self, w: Any, dy: Any, dx: _T) -> _T: ...
    def grad_filter(self, x: Any, dy: Any, dw: _T) -> _T: ...
    def grad_bias(self, dy: Any, db: _T) -> _T: ...

def pooling_output_shape(
    x_shape: Sequence[int], window: _Pair = 2, stride: Optional[_Pair] = None, padding: _Pair = 0
) -> Tuple[int, ...]: ...
def pooling_max(
    backend: Backend,
    x: Any,
    y: _T,
    indices: Optional[Any] = None,
    *,
    window: _Pair = 2,
    stride: Optional[_Pair] = None,
    padding: _Pair = 0,
) -> _T: ...
def pooling_max_grad(
    backend: Backend,
    x: Any,
    y: Any,
    dy: Any,
    dx: _T,
    *,
    window: _Pair = 2,
    stride: Optional[_Pair] = None,
    padding: _Pair = 0,
) -> _T: ...
def pooling_max_grad_indexed(backend: Backend, dy: Any, indices: Any, dx: _T) -> _T: ...
def pooling_avg(
    backend: Backend,
    x: Any,
    y: _T,
    *,
    window: _Pair = 2,
    stride: Optional[_Pair] = None,
    padding: _Pair = 0,
    include_padding: bool = True,
) -> _T: ...
def pooling_avg_grad(
    backend: Backend,
    dy: Any,
    dx: _T,
    *,
    window: _Pair = 2,
    stride: Optional[_Pair] = None,
    padding: _Pair = 0,
    include_padding: bool = True,
) -> _T: ...
def lrn(
    backend: Backend,
    x: Any,
    y: _T,
    *,
    n: int = 5,
    alpha: float = 1e-4,
    beta: float = 0.75,
    k: float = 1.0,
) -> _T: ...
def lrn_grad(
    backend: Backend,
    x: Any,
    y: Any,
    dy: Any,
    dx: _T,
    *,
    n: int = 5,
    alpha: float = 1e-4,
    beta: float = 0.75,
    k: float = 1.0,
) -> _T: ...
def dropout(backend: Backend, x: Any, y: _T, mask: Any, probability: float, seed: int) -> _T: ...
def dropout_grad(backend: Backend, dy: Any, mask: Any, dx: _T, probability: float) -> _T: ...
def layer_norm(
    backend: Backend,
    x: Any,
    weight: Any,
    bias: Any,
    y: _T,
    mean: Optional[Any] = None,
    rstd: Optional[Any] = None,
    *,
    axis: int = -1,
    epsilon: float = 1e-5,
) -> _T: ...
def layer_norm_grad(
    backend: Backend,
    x: Any,
    weight: Any,
    mean: Any,
    rstd: Any,
    dy: Any,
    dx: _T,
    dweight: _T,
    dbias: _T,
    *,
    axis: int = -1,
) -> Tuple[_T, _T, _T]: ...
def rms_norm(
    backend: Backend,
    x: Any,
    weight: Any,
    y: _T,
    rstd: Optional[Any] = None,
    *,
    axis: int = -1,
    epsilon: float = 1e-6,
) -> _T: ...
def rms_norm_grad(
    backend: Backend,
    x: Any,
    weight: Any,
    rstd: Any,
    dy: Any,
    dx: _T,
    dweight: _T,
    *,
    axis: int = -1,
) -> Tuple[_T, _T]: ...
def cross_entropy(
    backend: Backend,
    logits: Any,
    labels: Any,
    loss: _T,
    lse: Optional[Any] = None,
    *,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
    reduction: str = "mean",
) -> _T: ...
def cross_entropy_grad(
    backend: Backend,
    logits: Any,
    labels: Any,
    lse: Any,
    dloss: Any,
    dlogits: _T,
    *,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
    reduction: str = "mean",
) -> _T: ...
def batch_norm(
    backend: Backend,
    x: Any,
    weight: Any,
    bias: Any,
    y: _T,
    running_mean: Optional[Any] = None,
    running_var: Optional[Any] = None,
    save_mean: Optional[_T] = None,
    save_rstd: Optional[_T] = None,
    *,
    training: bool,
    momentum: float = 0.1,
    epsilon: float = 1e-5,
) -> Tuple[_T, Optional[_T], Optional[_T]]: ...
def batch_norm_grad(
    backend: Backend,
    x: Any,
    weight: Any,
    mean: Any,
    rstd: Any,
    dy: Any,
    dx: _T,
    dweight: Optional[_T] = None,
    dbias: Optional[_T] = None,
    *,
    training: bool,
) -> Tuple[_T, Optional[_T], Optional[_T]]: ...
def embedding(
    backend: Backend,
    weight: Any,
    indices: Any,
    y: Optional[Any] = None,
    *,
    padding_idx: int = -1,
) -> Any: ...
def embedding_grad(
    backend: Backend,
    indices: Any,
    dy: Any,
    num_embeddings: Union[int, Any],
    *,
    padding_idx: int = -1,
) -> Any: ...
