"""Neural-network ops on parenchyma backends: activations (sigmoid, relu, tanh, elu) with their
in-place forms and gradients, softmax / log_softmax, Convolution, pooling, LRN, dropout,
layer_norm, rms_norm, cross_entropy, embedding and batch_norm.

Every op takes the backend first, then its operands: parenchyma.Tensor objects, or DLPack
producers (NumPy arrays, PyTorch tensors, ...) imported for the call without a copy. Images are
NCHW, filters K x C/groups x R x S; gradients take the forward's output. A bad argument raises
parenchyma.Error (code 'invalid_argument', origin 'nn.<op>') naming it, before anything runs.
The GIL is released while an op runs.

    conv = parenchyma.nn.Convolution(backend, x.shape, w.shape, padding=1)
    y = parenchyma.Tensor(conv.y_shape)
    conv.forward(x, w, y, bias=b)
    parenchyma.nn.relu_pointwise(backend, y)
"""

from ._parenchyma import nn as _nn

_names = [
    "sigmoid", "sigmoid_pointwise", "sigmoid_grad", "sigmoid_pointwise_grad",
    "relu", "relu_pointwise", "relu_grad", "relu_pointwise_grad",
    "tanh", "tanh_pointwise", "tanh_grad", "tanh_pointwise_grad",
    "elu", "elu_pointwise", "elu_grad", "elu_pointwise_grad",
    "softmax", "softmax_grad", "log_softmax", "log_softmax_grad",
    "Convolution",
    "pooling_output_shape", "pooling_max", "pooling_max_grad", "pooling_max_grad_indexed",
    "pooling_avg", "pooling_avg_grad",
    "lrn", "lrn_grad", "dropout", "dropout_grad",
    "layer_norm", "layer_norm_grad", "rms_norm", "rms_norm_grad",
    "cross_entropy", "cross_entropy_grad",
    "embedding", "embedding_grad",
    "batch_norm", "batch_norm_grad",
]
globals().update({n: getattr(_nn, n) for n in _names})

__all__ = list(_names)
