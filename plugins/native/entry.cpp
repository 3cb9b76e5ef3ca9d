// parenchyma native framework plugin: the entry symbol and the plugin object.
#include "native.hpp"

PCY_FRAMEWORK_PLUGIN(parenchyma::native::plugin)
