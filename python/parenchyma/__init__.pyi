# Type stubs for the parenchyma package.
from typing import Any, Optional

from . import blas as blas
from . import nn as nn
from . import coll as coll
from . import array_api as array_api
from . import random as random
from ._parenchyma import DLPACK_VERSION as DLPACK_VERSION
from ._parenchyma import ArgumentTypeError as ArgumentTypeError
from ._parenchyma import Backend as Backend
from ._parenchyma import Error as Error
from ._parenchyma import Tensor as Tensor
from ._parenchyma import __version__ as __version__
from ._parenchyma import from_dlpack as from_dlpack
from ._parenchyma import info as info
from ._parenchyma import devices as devices
from ._parenchyma import _DType, _Shape

def zeros(shape: _Shape, dtype: _DType = "float32") -> Tensor: ...
def asarray(obj: Any, dtype: Optional[_DType] = None, backend: Optional[Backend] = None) -> Tensor: ...
