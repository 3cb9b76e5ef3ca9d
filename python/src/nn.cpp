// parenchyma Python bindings: parenchyma.nn, the NN front-end (parenchyma/nn.hpp) over Tensors or
// any DLPack producer, with the GIL released while an op runs.
#include "bindings.hpp"
#include "ops.hpp"

#include <parenchyma/nn.hpp>

#include <array>
#include <string>

namespace parenchyma::python {

namespace {

// A geometry pair from a Python int (both axes) or a sequence of two ints.
nn::Pair pair_of(const py::object& v, const char* origin, const char* name) {
  if (py::hasattr(v, "__index__")) {
    const int64_t i = int_arg(v, origin, name);
    return {i, i};
  }
  if (py::isinstance<py::sequence>(v) && !py::isinstance<py::str>(v) && py::len(v) == 2) {
    const std::vector<int64_t> t = ints_arg(v, origin, name);
    return {t[0], t[1]};
  }
  fail_type(origin, std::string("argument ") + name +
                        ": expected an int or a pair of ints (height, width)");
}

nn::Shape shape_of(const py::object& v, const char* origin, const char* name) {
  return ints_arg(v, origin, name);
}

int64_t algorithm_of(const py::object& v, const char* origin) {
  if (py::isinstance<py::str>(v)) {
    const auto s = v.cast<std::string>();
    if (s == "auto") return nn::algorithm_auto;
    if (s == "heuristic") return nn::algorithm_heuristic;
  } else if (py::hasattr(v, "__index__")) {
    return int_arg(v, origin, "algorithm");
  }
  fail(errc::invalid_argument, origin,
       "argument algorithm: expected 'auto', 'heuristic', an int (a bundle's algorithm) or a "
       "tuple of three of these (forward, grad_data, grad_filter)");
}

nn::math_mode math_of(const std::string& s, const char* origin) {
  if (s == "by_setting") return nn::math_mode::by_setting;
  if (s == "strict") return nn::math_mode::strict;
  if (s == "tf32") return nn::math_mode::tf32;
  fail(errc::invalid_argument, origin,
       "argument math: '" + s + "', expected 'by_setting', 'strict' or 'tf32'");
}

nn::direction direction_of(const std::string& s) {
  if (s == "forward") return nn::direction::forward;
  if (s == "grad_data") return nn::direction::grad_data;
  if (s == "grad_filter") return nn::direction::grad_filter;
  fail(errc::invalid_argument, "nn.convolution",
       "direction '" + s + "': expected 'forward', 'grad_data' or 'grad_filter'");
}

nn::PoolingParams pooling_of(const py::object& window, const py::object& stride,
                             const py::object& padding, bool include_padding, const char* origin) {
  nn::PoolingParams p;
  p.window = pair_of(window, origin, "window");
  p.stride = stride.is_none() ? nn::Pair{0, 0} : pair_of(stride, origin, "stride");
  p.padding = pair_of(padding, origin, "padding");
  p.include_padding = include_padding;
  return p;
}

// A Convolution and the backend it was made for (kept alive with it).
struct PyConvolution {
  std::shared_ptr<BackendState> backend;
  std::unique_ptr<nn::Convolution> conv;
};

// Activation bindings: forward, in place, gradient, in-place gradient.
template <void (*F)(const Backend&, const TensorStorage&, TensorStorage&),
          void (*PW)(const Backend&, TensorStorage&),
          void (*G)(const Backend&, const TensorStorage&, const TensorStorage&, TensorStorage&),
          void (*PWG)(const Backend&, const TensorStorage&, TensorStorage&)>
void bind_activation(py::module_& m, const std::string& name, const char* formula) {
  const std::string origin = "nn." + name;
  m.def(
      name.c_str(),
      [origin](const PyBackend& b, const py::object& x, const py::object& y) {
        const Operand ox = operand(b, x, origin.c_str(), "x"),
                      oy = operand(b, y, origin.c_str(), "y");
        run(b, {&ox, &oy}, [&](const Backend& be) { F(be, ox.storage(), oy.storage()); });
        return y;
      },
      py::arg("backend"), py::arg("x"), py::arg("y"),
      (std::string("y = ") + formula + " (x and y: the same size). Returns y.").c_str());
  m.def((name + "_pointwise").c_str(),
        [origin](const PyBackend& b, const py::object& x) {
          const Operand ox = operand(b, x, origin.c_str(), "x");
          run(b, {&ox}, [&](const Backend& be) { PW(be, ox.storage()); });
          return x;
        },
        py::arg("backend"), py::arg("x"),
        (std::string("x = ") + formula + " in place. Returns x.").c_str());
  m.def((name + "_grad").c_str(),
        [origin](const PyBackend& b, const py::object& y, const py::object& dy,
                 const py::object& dx) {
          const Operand oy = operand(b, y, origin.c_str(), "y"),
                        ody = operand(b, dy, origin.c_str(), "dy"),
                        odx = operand(b, dx, origin.c_str(), "dx");
          run(b, {&oy, &ody, &odx},
              [&](const Backend& be) { G(be, oy.storage(), ody.storage(), odx.storage()); });
          return dx;
        },
        py::arg("backend"), py::arg("y"), py::arg("dy"), py::arg("dx"),
        "dx = dy * f'(x), from the forward's output y. Returns dx.");
  m.def((name + "_pointwise_grad").c_str(),
        [origin](const PyBackend& b, const py::object& y, const py::object& d) {
          const Operand oy = operand(b, y, origin.c_str(), "y"),
                        od = operand(b, d, origin.c_str(), "d");
          run(b, {&oy, &od}, [&](const Backend& be) { PWG(be, oy.storage(), od.storage()); });
          return d;
        },
        py::arg("backend"), py::arg("y"), py::arg("d"),
        "d = d * f'(x) in place (d holds dy, becomes dx), from the forward's output y. Returns d.");
}

template <void (*F)(const Backend&, const TensorStorage&, TensorStorage&, int64_t),
          void (*G)(const Backend&, const TensorStorage&, const TensorStorage&, TensorStorage&,
                    int64_t)>
void bind_softmax(py::module_& m, const std::string& name, const char* what) {
  const std::string origin = "nn." + name;
  m.def(
      name.c_str(),
      [origin](const PyBackend& b, const py::object& x, const py::object& y,
               const py::object& axis_arg) {
        const int64_t axis = int_arg(axis_arg, origin, "axis");
        const Operand ox = operand(b, x, origin.c_str(), "x"),
                      oy = operand(b, y, origin.c_str(), "y");
        run(b, {&ox, &oy}, [&](const Backend& be) { F(be, ox.storage(), oy.storage(), axis); });
        return y;
      },
      py::arg("backend"), py::arg("x"), py::arg("y"), py::arg("axis") = -1,
      (std::string("y = ") + what + " of x along axis (x and y: the same shape). Returns y.")
          .c_str());
  m.def((name + "_grad").c_str(),
        [origin](const PyBackend& b, const py::object& y, const py::object& dy,
                 const py::object& dx, const py::object& axis_arg) {
          const int64_t axis = int_arg(axis_arg, origin, "axis");
          const Operand oy = operand(b, y, origin.c_str(), "y"),
                        ody = operand(b, dy, origin.c_str(), "dy"),
                        odx = operand(b, dx, origin.c_str(), "dx");
          run(b, {&oy, &ody, &odx},
              [&](const Backend& be) { G(be, oy.storage(), ody.storage(), odx.storage(), axis); });
          return dx;
        },
        py::arg("backend"), py::arg("y"), py::arg("dy"), py::arg("dx"), py::arg("axis") = -1,
        "The gradient, from the forward's output y. Returns dx.");
}

// A statistics argument of layer_norm / rms_norm: a tensor, or None (an empty tensor of the
// statistics dtype: not saved).
Operand stat_operand(const PyBackend& b, const py::object& obj, const Operand& x, const char* op,
                     const char* name) {
  if (!obj.is_none()) return operand(b, obj, op, name);
  Operand o;
  o.tensor.storage = std::make_shared<TensorStorage>(
      x.storage().dtype() == PCY_DTYPE_F64 ? PCY_DTYPE_F64 : PCY_DTYPE_F32,
      std::vector<int64_t>{0});
  return o;
}

// An optional output of x's dtype (batch_norm_grad's dweight, dbias): a tensor, or None (an
// empty tensor: not computed).
Operand optional_operand(const PyBackend& b, const py::object& obj, const Operand& x,
                         const char* op, const char* name) {
  if (!obj.is_none()) return operand(b, obj, op, name);
  Operand o;
  o.tensor.storage = std::make_shared<TensorStorage>(x.storage().dtype(), std::vector<int64_t>{0});
  return o;
}

// cross_entropy's reduction: 'none', 'mean' or 'sum'.
nn::Reduction reduction_of(const py::object& v, const char* origin) {
  if (py::isinstance<py::str>(v)) {
    const auto s = v.cast<std::string>();
    if (s == "none") return nn::Reduction::none;
    if (s == "mean") return nn::Reduction::mean;
    if (s == "sum") return nn::Reduction::sum;
    fail(errc::invalid_argument, origin,
         "argument reduction: '" + s + "', expected 'none', 'mean' or 'sum'");
  }
  fail(errc::invalid_argument, origin, "argument reduction: expected 'none', 'mean' or 'sum'");
}

} // namespace

void bind_nn(py::module_& parent) {
  py::module_ m =
      parent.def_submodule("nn", R"(Neural-network ops on parenchyma backends (parenchyma/nn.hpp).

Every op takes the backend first, then its operands: parenchyma.Tensor objects, or any DLPack
producer imported for the call without a copy. Images are NCHW, filters K x C/groups x R x S.
Gradients take the forward's output. Every argument is checked before anything runs: a bad one
raises parenchyma.Error (code 'invalid_argument', origin 'nn.<op>') naming it. The GIL is
released while an op runs. Semantics: docs/nn.md.)");

  bind_activation<&nn::sigmoid, &nn::sigmoid_pointwise, &nn::sigmoid_grad,
                  &nn::sigmoid_pointwise_grad>(m, "sigmoid", "1 / (1 + exp(-x))");
  bind_activation<&nn::relu, &nn::relu_pointwise, &nn::relu_grad, &nn::relu_pointwise_grad>(
      m, "relu", "max(x, 0)");
  bind_activation<&nn::tanh, &nn::tanh_pointwise, &nn::tanh_grad, &nn::tanh_pointwise_grad>(
      m, "tanh", "tanh(x)");

  m.def(
      "elu",
      [](const PyBackend& b, const py::object& x, const py::object& y, double alpha) {
        const Operand ox = operand(b, x, "nn.elu", "x"), oy = operand(b, y, "nn.elu", "y");
        run(b, {&ox, &oy},
            [&](const Backend& be) { nn::elu(be, ox.storage(), oy.storage(), alpha); });
        return y;
      },
      py::arg("backend"), py::arg("x"), py::arg("y"), py::arg("alpha") = 1.0,
      "y = x > 0 ? x : alpha (exp(x) - 1). Returns y.");
  m.def(
      "elu_pointwise",
      [](const PyBackend& b, const py::object& x, double alpha) {
        const Operand ox = operand(b, x, "nn.elu_pointwise", "x");
        run(b, {&ox}, [&](const Backend& be) { nn::elu_pointwise(be, ox.storage(), alpha); });
        return x;
      },
      py::arg("backend"), py::arg("x"), py::arg("alpha") = 1.0, "elu in place. Returns x.");
  m.def(
      "elu_grad",
      [](const PyBackend& b, const py::object& y, const py::object& dy, const py::object& dx,
         double alpha) {
        const Operand oy = operand(b, y, "nn.elu_grad", "y"),
                      ody = operand(b, dy, "nn.elu_grad", "dy"),
                      odx = operand(b, dx, "nn.elu_grad", "dx");
        run(b, {&oy, &ody, &odx}, [&](const Backend& be) {
          nn::elu_grad(be, oy.storage(), ody.storage(), odx.storage(), alpha);
        });
        return dx;
      },
      py::arg("backend"), py::arg("y"), py::arg("dy"), py::arg("dx"), py::arg("alpha") = 1.0,
      "dx = dy * (y > 0 ? 1 : y + alpha), from the forward's output y. Returns dx.");
  m.def(
      "elu_pointwise_grad",
      [](const PyBackend& b, const py::object& y, const py::object& d, double alpha) {
        const Operand oy = operand(b, y, "nn.elu_pointwise_grad", "y"),
                      od = operand(b, d, "nn.elu_pointwise_grad", "d");
        run(b, {&oy, &od}, [&](const Backend& be) {
          nn::elu_pointwise_grad(be, oy.storage(), od.storage(), alpha);
        });
        return d;
      },
      py::arg("backend"), py::arg("y"), py::arg("d"), py::arg("alpha") = 1.0,
      "elu_grad in place (d holds dy, becomes dx). Returns d.");

  bind_softmax<&nn::softmax, &nn::softmax_grad>(m, "softmax", "softmax");
  bind_softmax<&nn::log_softmax, &nn::log_softmax_grad>(m, "log_softmax", "log(softmax)");

  py::class_<PyConvolution>(m, "Convolution", R"(A 2-d convolution configured once for given shapes
(as cuDNN's descriptors): checks the geometry, chooses each direction's algorithm on the backend
(algorithm 'auto' measures once per shape and device; 'heuristic'; or a bundle's number) and
knows its workspace. x: N x C x H x W, w: K x C/groups x R x S, y: N x K x P x Q (y_shape).
math: 'by_setting' (PARENCHYMA_NN_MATH, strict unless set), 'strict' or 'tf32'.)")
      .def(py::init([](const PyBackend& b, const py::object& x_shape, const py::object& w_shape,
                       const py::object& stride, const py::object& padding,
                       const py::object& dilation, const py::object& groups,
                       const py::object& algorithm, const std::string& math, bool training,
                       const py::object& dtype) {
             constexpr const char* origin = "nn.convolution";
             nn::ConvolutionParams p;
             p.stride = pair_of(stride, origin, "stride");
             p.padding = pair_of(padding, origin, "padding");
             p.dilation = pair_of(dilation, origin, "dilation");
             p.groups = int_arg(groups, origin, "groups");
             if (py::isinstance<py::tuple>(algorithm) || py::isinstance<py::list>(algorithm)) {
               const auto v = algorithm.cast<std::vector<py::object>>();
               if (v.size() != 3)
                 fail(errc::invalid_argument, origin,
                      "argument algorithm: a sequence must hold three values (forward, "
                      "grad_data, grad_filter)");
               for (size_t i = 0; i < 3; ++i)
                 p.algorithm[i] = algorithm_of(v[i], origin);
             } else {
               const int64_t a = algorithm_of(algorithm, origin);
               p.algorithm = {a, a, a};
             }
             p.math = math_of(math, origin);
             p.training = training;
             const pcy_dtype dt = dtype_from_object(dtype, "dtype");
             const nn::Shape xs = shape_of(x_shape, origin, "x_shape"),
                             ws = shape_of(w_shape, origin, "w_shape");
             auto c = std::make_unique<PyConvolution>();
             c->backend = b.state;
             without_gil([&] {
               const OrderedLock lock({&b.state->mutex});
               c->conv = std::make_unique<nn::Convolution>(b.state->backend, xs, ws, p, dt);
             });
             return c;
           }),
           py::arg("backend"), py::arg("x_shape"), py::arg("w_shape"), py::kw_only(),
           py::arg("stride") = 1, py::arg("padding") = 0, py::arg("dilation") = 1,
           py::arg("groups") = 1, py::arg("algorithm") = "auto", py::arg("math") = "by_setting",
           py::arg("training") = true, py::arg("dtype") = "float32",
           "Configures the convolution on `backend` for inputs of x_shape and filters of w_shape "
           "(see the class doc); raises parenchyma.Error naming the argument when the geometry "
           "does not fit.")
      .def_property_readonly(
          "y_shape", [](const PyConvolution& c) { return py::tuple(py::cast(c.conv->y_shape())); },
          "The output shape N x K x P x Q.")
      .def_property_readonly(
          "x_shape", [](const PyConvolution& c) { return py::tuple(py::cast(c.conv->x_shape())); },
          "The input shape N x C x H x W it was configured for.")
      .def_property_readonly(
          "w_shape", [](const PyConvolution& c) { return py::tuple(py::cast(c.conv->w_shape())); },
          "The filter shape K x C/groups x R x S it was configured for.")
      .def_property_readonly(
          "backend", [](const PyConvolution& c) { return PyBackend{c.backend}; },
          "The backend it runs on.")
      .def_property_readonly(
          "dtype", [](const PyConvolution& c) { return std::string(dtype_name(c.conv->dtype())); },
          "The dtype of x, w and y.")
      .def(
          "__repr__",
          [](const PyConvolution& c) {
            const auto pair = [](const auto& v) {
              return "(" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + ")";
            };
            const auto shape = [](const nn::Shape& v) {
              std::string r = "(";
              for (size_t i = 0; i < v.size(); ++i)
                r += (i ? ", " : "") + std::to_string(v[i]);
              return r + ")";
            };
            const nn::ConvolutionParams& p = c.conv->params();
            return "<parenchyma.nn.Convolution x_shape=" + shape(c.conv->x_shape()) +
                   " w_shape=" + shape(c.conv->w_shape()) + " y_shape=" + shape(c.conv->y_shape()) +
                   " stride=" + pair(p.stride) + " padding=" + pair(p.padding) +
                   " dilation=" + pair(p.dilation) + " groups=" + std::to_string(p.groups) +
                   " dtype=" + dtype_name(c.conv->dtype()) + " algorithms=(" +
                   std::to_string(c.conv->algorithm(nn::direction::forward)) + ", " +
                   std::to_string(c.conv->algorithm(nn::direction::grad_data)) + ", " +
                   std::to_string(c.conv->algorithm(nn::direction::grad_filter)) + ") backend='" +
                   c.backend->backend.name() + "'>";
          },
          "The shapes, parameters, dtype, the chosen algorithms (forward, grad_data, "
          "grad_filter) and the backend's name.")
      .def(
          "algorithm",
          [](const PyConvolution& c, const std::string& d) {
            return c.conv->algorithm(direction_of(d));
          },
          py::arg("direction") = "forward",
          "The chosen algorithm (the bundle's number) of 'forward', 'grad_data' or 'grad_filter' "
          "(-1 where training=False left it out).")
      .def(
          "workspace_bytes",
          [](const PyConvolution& c, const std::string& d) {
            return c.conv->workspace_bytes(direction_of(d));
          },
          py::arg("direction") = "forward", "The workspace the direction's algorithm needs.")
      .def(
          "forward",
          [](const PyConvolution& c, const py::object& x, const py::object& w, const py::object& y,
             const py::object& bias) {
            const PyBackend b{c.backend};
            const Operand ox = operand(b, x, "nn.convolution", "x"),
                          ow = operand(b, w, "nn.convolution", "w"),
                          oy = operand(b, y, "nn.convolution", "y");
            if (bias.is_none()) {
              run(b, {&ox, &ow, &oy}, [&](const Backend&) {
                c.conv->forward(ox.storage(), ow.storage(), oy.storage());
              });
            } else {
              const Operand ob = operand(b, bias, "nn.convolution", "bias");
              run(b, {&ox, &ow, &ob, &oy}, [&](const Backend&) {
                c.conv->forward(ox.storage(), ow.storage(), ob.storage(), oy.storage());
              });
            }
            return y;
          },
          py::arg("x"), py::arg("w"), py::arg("y"), py::arg("bias") = py::none(),
          "y = x (*) w (+ bias, one value per output channel). Returns y.")
      .def(
          "grad_data",
          [](const PyConvolution& c, const py::object& w, const py::object& dy,
             const py::object& dx) {
            const PyBackend b{c.backend};
            const Operand ow = operand(b, w, "nn.convolution_grad_data", "w"),
                          ody = operand(b, dy, "nn.convolution_grad_data", "dy"),
                          odx = operand(b, dx, "nn.convolution_grad_data", "dx");
            run(b, {&ow, &ody, &odx}, [&](const Backend&) {
              c.conv->grad_data(ow.storage(), ody.storage(), odx.storage());
            });
            return dx;
          },
          py::arg("w"), py::arg("dy"), py::arg("dx"),
          "dx, the gradient with respect to x. Returns dx.")
      .def(
          "grad_filter",
          [](const PyConvolution& c, const py::object& x, const py::object& dy,
             const py::object& dw) {
            const PyBackend b{c.backend};
            const Operand ox = operand(b, x, "nn.convolution_grad_filter", "x"),
                          ody = operand(b, dy, "nn.convolution_grad_filter", "dy"),
                          odw = operand(b, dw, "nn.convolution_grad_filter", "dw");
            run(b, {&ox, &ody, &odw}, [&](const Backend&) {
              c.conv->grad_filter(ox.storage(), ody.storage(), odw.storage());
            });
            return dw;
          },
          py::arg("x"), py::arg("dy"), py::arg("dw"),
          "dw, the gradient with respect to w. Returns dw.")
      .def(
          "grad_bias",
          [](const PyConvolution& c, const py::object& dy, const py::object& db) {
            const PyBackend b{c.backend};
            const Operand ody = operand(b, dy, "nn.convolution_grad_bias", "dy"),
                          odb = operand(b, db, "nn.convolution_grad_bias", "db");
            run(b, {&ody, &odb},
                [&](const Backend&) { c.conv->grad_bias(ody.storage(), odb.storage()); });
            return db;
          },
          py::arg("dy"), py::arg("db"), "db[k] = the sum of dy over n, p, q. Returns db.");

  m.def(
      "pooling_output_shape",
      [](const py::object& x_shape, const py::object& window, const py::object& stride,
         const py::object& padding) {
        const auto p = pooling_of(window, stride, padding, true, "nn.pooling_max");
        return py::tuple(
            py::cast(nn::pooling_output_shape(shape_of(x_shape, "nn.pooling_max", "x_shape"), p)));
      },
      py::arg("x_shape"), py::arg("window") = 2, py::arg("stride") = py::none(),
      py::arg("padding") = 0, "The shape pooling gives for an input of shape x_shape.");
  m.def(
      "pooling_max",
      [](const PyBackend& b, const py::object& x, const py::object& y, const py::object& indices,
         const py::object& window, const py::object& stride, const py::object& padding) {
        const auto p = pooling_of(window, stride, padding, true, "nn.pooling_max");
        const Operand ox = operand(b, x, "nn.pooling_max", "x"),
                      oy = operand(b, y, "nn.pooling_max", "y");
        if (indices.is_none()) {
          run(b, {&ox, &oy},
              [&](const Backend& be) { nn::pooling_max(be, ox.storage(), oy.storage(), p); });
        } else {
          const Operand oi = operand(b, indices, "nn.pooling_max_indexed", "indices");
          run(b, {&ox, &oy, &oi}, [&](const Backend& be) {
            nn::pooling_max(be, ox.storage(), oy.storage(), oi.storage(), p);
          });
        }
        return y;
      },
      py::arg("backend"), py::arg("x"), py::arg("y"), py::arg("indices") = py::none(),
      py::kw_only(), py::arg("window") = 2, py::arg("stride") = py::none(), py::arg("padding") = 0,
      "y = the maximum of each window (stride None: the window); with indices (int32, the shape "
      "of y) also the position h W + w of each maximum in its plane. Returns y.");
  m.def(
      "pooling_max_grad",
      [](const PyBackend& b, const py::object& x, const py::object& y, const py::object& dy,
         const py::object& dx, const py::object& window, const py::object& stride,
         const py::object& padding) {
        const auto p = pooling_of(window, stride, padding, true, "nn.pooling_max_grad");
        const Operand ox = operand(b, x, "nn.pooling_max_grad", "x"),
                      oy = operand(b, y, "nn.pooling_max_grad", "y"),
                      ody = operand(b, dy, "nn.pooling_max_grad", "dy"),
                      odx = operand(b, dx, "nn.pooling_max_grad", "dx");
        run(b, {&ox, &oy, &ody, &odx}, [&](const Backend& be) {
          nn::pooling_max_grad(be, ox.storage(), oy.storage(), ody.storage(), odx.storage(), p);
        });
        return dx;
      },
      py::arg("backend"), py::arg("x"), py::arg("y"), py::arg("dy"), py::arg("dx"), py::kw_only(),
      py::arg("window") = 2, py::arg("stride") = py::none(), py::arg("padding") = 0,
      "dx from the forward's x and y (dy goes to the first maximum of each window). Returns dx.");
  m.def(
      "pooling_max_grad_indexed",
      [](const PyBackend& b, const py::object& dy, const py::object& indices,
         const py::object& dx) {
        const Operand ody = operand(b, dy, "nn.pooling_max_grad_indexed", "dy"),
                      oi = operand(b, indices, "nn.pooling_max_grad_indexed", "indices"),
                      odx = operand(b, dx, "nn.pooling_max_grad_indexed", "dx");
        run(b, {&ody, &oi, &odx}, [&](const Backend& be) {
          nn::pooling_max_grad(be, ody.storage(), oi.storage(), odx.storage());
        });
        return dx;
      },
      py::arg("backend"), py::arg("dy"), py::arg("indices"), py::arg("dx"),
      "dx from the indices pooling_max wrote. Returns dx.");
  m.def(
      "pooling_avg",
      [](const PyBackend& b, const py::object& x, const py::object& y, const py::object& window,
         const py::object& stride, const py::object& padding, bool include_padding) {
        const auto p = pooling_of(window, stride, padding, include_padding, "nn.pooling_avg");
        const Operand ox = operand(b, x, "nn.pooling_avg", "x"),
                      oy = operand(b, y, "nn.pooling_avg", "y");
        run(b, {&ox, &oy},
            [&](const Backend& be) { nn::pooling_avg(be, ox.storage(), oy.storage(), p); });
        return y;
      },
      py::arg("backend"), py::arg("x"), py::arg("y"), py::kw_only(), py::arg("window") = 2,
      py::arg("stride") = py::none(), py::arg("padding") = 0, py::arg("include_padding") = true,
      "y = the mean of each window (include_padding: divided by the window's area, else by the "
      "elements of x in it). Returns y.");
  m.def(
      "pooling_avg_grad",
      [](const PyBackend& b, const py::object& dy, const py::object& dx, const py::object& window,
         const py::object& stride, const py::object& padding, bool include_padding) {
        const auto p = pooling_of(window, stride, padding, include_padding, "nn.pooling_avg_grad");
        const Operand ody = operand(b, dy, "nn.pooling_avg_grad", "dy"),
                      odx = operand(b, dx, "nn.pooling_avg_grad", "dx");
        run(b, {&ody, &odx},
            [&](const Backend& be) { nn::pooling_avg_grad(be, ody.storage(), odx.storage(), p); });
        return dx;
      },
      py::arg("backend"), py::arg("dy"), py::arg("dx"), py::kw_only(), py::arg("window") = 2,
      py::arg("stride") = py::none(), py::arg("padding") = 0, py::arg("include_padding") = true,
      "The gradient of pooling_avg (dx: the forward's input shape). Returns dx.");
  m.def(
      "lrn",
      [](const PyBackend& b, const py::object& x, const py::object& y, const py::object& n_arg,
         double alpha, double beta, double k) {
        const int64_t n = int_arg(n_arg, "nn.lrn", "n");
        const Operand ox = operand(b, x, "nn.lrn", "x"), oy = operand(b, y, "nn.lrn", "y");
        run(b, {&ox, &oy}, [&](const Backend& be) {
          nn::lrn(be, ox.storage(), oy.storage(), nn::LrnParams{n, alpha, beta, k});
        });
        return y;
      },
      py::arg("backend"), py::arg("x"), py::arg("y"), py::kw_only(), py::arg("n") = 5,
      py::arg("alpha") = 1e-4, py::arg("beta") = 0.75, py::arg("k") = 1.0,
      "Local response normalisation across channels, as torch.nn.LocalResponseNorm. Returns y.");
  m.def(
      "lrn_grad",
      [](const PyBackend& b, const py::object& x, const py::object& y, const py::object& dy,
         const py::object& dx, const py::object& n_arg, double alpha, double beta, double k) {
        const int64_t n = int_arg(n_arg, "nn.lrn_grad", "n");
        const Operand ox = operand(b, x, "nn.lrn_grad", "x"),
                      oy = operand(b, y, "nn.lrn_grad", "y"),
                      ody = operand(b, dy, "nn.lrn_grad", "dy"),
                      odx = operand(b, dx, "nn.lrn_grad", "dx");
        run(b, {&ox, &oy, &ody, &odx}, [&](const Backend& be) {
          nn::lrn_grad(be, ox.storage(), oy.storage(), ody.storage(), odx.storage(),
                       nn::LrnParams{n, alpha, beta, k});
        });
        return dx;
      },
      py::arg("backend"), py::arg("x"), py::arg("y"), py::arg("dy"), py::arg("dx"), py::kw_only(),
      py::arg("n") = 5, py::arg("alpha") = 1e-4, py::arg("beta") = 0.75, py::arg("k") = 1.0,
      "The gradient of lrn, from its input x and output y. Returns dx.");
  m.def(
      "dropout",
      [](const PyBackend& b, const py::object& x, const py::object& y, const py::object& mask,
         double probability, const py::object& seed_arg) {
        const uint64_t seed = uint_arg(seed_arg, "nn.dropout", "seed");
        const Operand ox = operand(b, x, "nn.dropout", "x"), oy = operand(b, y, "nn.dropout", "y"),
                      om = operand(b, mask, "nn.dropout", "mask");
        run(b, {&ox, &oy, &om}, [&](const Backend& be) {
          nn::dropout(be, ox.storage(), oy.storage(), om.storage(), probability, seed);
        });
        return y;
      },
      py::arg("backend"), py::arg("x"), py::arg("y"), py::arg("mask"), py::arg("probability"),
      py::arg("seed"),
      "y = x * mask / (1 - probability), mask (uint8) drawn from seed, the same on every "
      "framework. Returns y.");
  m.def(
      "dropout_grad",
      [](const PyBackend& b, const py::object& dy, const py::object& mask, const py::object& dx,
         double probability) {
        const Operand ody = operand(b, dy, "nn.dropout_grad", "dy"),
                      om = operand(b, mask, "nn.dropout_grad", "mask"),
                      odx = operand(b, dx, "nn.dropout_grad", "dx");
        run(b, {&ody, &om, &odx}, [&](const Backend& be) {
          nn::dropout_grad(be, ody.storage(), om.storage(), odx.storage(), probability);
        });
        return dx;
      },
      py::arg("backend"), py::arg("dy"), py::arg("mask"), py::arg("dx"), py::arg("probability"),
      "dx = mask ? dy / (1 - probability) : 0. Returns dx.");

  m.def(
      "layer_norm",
      [](const PyBackend& b, const py::object& x, const py::object& weight, const py::object& bias,
         const py::object& y, const py::object& mean, const py::object& rstd,
         const py::object& axis_arg, double epsilon) {
        const char* op = "nn.layer_norm";
        const int64_t axis = int_arg(axis_arg, op, "axis");
        const Operand ox = operand(b, x, op, "x"), ow = operand(b, weight, op, "weight"),
                      ob = operand(b, bias, op, "bias"), oy = operand(b, y, op, "y");
        const Operand om = stat_operand(b, mean, ox, op, "mean"),
                      orr = stat_operand(b, rstd, ox, op, "rstd");
        run(b, {&ox, &ow, &ob, &oy, &om, &orr}, [&](const Backend& be) {
          nn::layer_norm(be, ox.storage(), ow.storage(), ob.storage(), oy.storage(), om.storage(),
                         orr.storage(), axis, epsilon);
        });
        return y;
      },
      py::arg("backend"), py::arg("x"), py::arg("weight"), py::arg("bias"), py::arg("y"),
      py::arg("mean") = py::none(), py::arg("rstd") = py::none(), py::kw_only(),
      py::arg("axis") = -1, py::arg("epsilon") = 1e-5,
      "Layer normalisation over the dimensions of x from axis on: y = (x - mean) / sqrt(var + "
      "epsilon) * weight + bias (biased variance). weight, bias: one value per normalised "
      "element. mean, rstd: one per row, float32 (float64 for float64 data), saved for "
      "layer_norm_grad; None saves nothing. Returns y.");
  m.def(
      "layer_norm_grad",
      [](const PyBackend& b, const py::object& x, const py::object& weight, const py::object& mean,
         const py::object& rstd, const py::object& dy, const py::object& dx,
         const py::object& dweight, const py::object& dbias, const py::object& axis_arg) {
        const char* op = "nn.layer_norm_grad";
        const int64_t axis = int_arg(axis_arg, op, "axis");
        const Operand ox = operand(b, x, op, "x"), ow = operand(b, weight, op, "weight"),
                      om = operand(b, mean, op, "mean"), orr = operand(b, rstd, op, "rstd"),
                      ody = operand(b, dy, op, "dy"), odx = operand(b, dx, op, "dx"),
                      odw = operand(b, dweight, op, "dweight"),
                      odb = operand(b, dbias, op, "dbias");
        run(b, {&ox, &ow, &om, &orr, &ody, &odx, &odw, &odb}, [&](const Backend& be) {
          nn::layer_norm_grad(be, ox.storage(), ow.storage(), om.storage(), orr.storage(),
                              ody.storage(), odx.storage(), odw.storage(), odb.storage(), axis);
        });
        return py::make_tuple(dx, dweight, dbias);
      },
      py::arg("backend"), py::arg("x"), py::arg("weight"), py::arg("mean"), py::arg("rstd"),
      py::arg("dy"), py::arg("dx"), py::arg("dweight"), py::arg("dbias"), py::kw_only(),
      py::arg("axis") = -1,
      "The gradients of layer_norm from its input x, weight and saved mean and rstd: dx, and "
      "dweight and dbias summed over the rows. Returns (dx, dweight, dbias).");
  m.def(
      "rms_norm",
      [](const PyBackend& b, const py::object& x, const py::object& weight, const py::object& y,
         const py::object& rstd, const py::object& axis_arg, double epsilon) {
        const char* op = "nn.rms_norm";
        const int64_t axis = int_arg(axis_arg, op, "axis");
        const Operand ox = operand(b, x, op, "x"), ow = operand(b, weight, op, "weight"),
                      oy = operand(b, y, op, "y");
        const Operand orr = stat_operand(b, rstd, ox, op, "rstd");
        run(b, {&ox, &ow, &oy, &orr}, [&](const Backend& be) {
          nn::rms_norm(be, ox.storage(), ow.storage(), oy.storage(), orr.storage(), axis, epsilon);
        });
        return y;
      },
      py::arg("backend"), py::arg("x"), py::arg("weight"), py::arg("y"),
      py::arg("rstd") = py::none(), py::kw_only(), py::arg("axis") = -1, py::arg("epsilon") = 1e-6,
      "Root-mean-square normalisation over the dimensions of x from axis on: y = x / "
      "sqrt(mean(x^2) + epsilon) * weight. rstd: one per row (float32, float64 for float64 "
      "data), saved for rms_norm_grad; None saves nothing. Returns y.");
  m.def(
      "rms_norm_grad",
      [](const PyBackend& b, const py::object& x, const py::object& weight, const py::object& rstd,
         const py::object& dy, const py::object& dx, const py::object& dweight,
         const py::object& axis_arg) {
        const char* op = "nn.rms_norm_grad";
        const int64_t axis = int_arg(axis_arg, op, "axis");
        const Operand ox = operand(b, x, op, "x"), ow = operand(b, weight, op, "weight"),
                      orr = operand(b, rstd, op, "rstd"), ody = operand(b, dy, op, "dy"),
                      odx = operand(b, dx, op, "dx"), odw = operand(b, dweight, op, "dweight");
        run(b, {&ox, &ow, &orr, &ody, &odx, &odw}, [&](const Backend& be) {
          nn::rms_norm_grad(be, ox.storage(), ow.storage(), orr.storage(), ody.storage(),
                            odx.storage(), odw.storage(), axis);
        });
        return py::make_tuple(dx, dweight);
      },
      py::arg("backend"), py::arg("x"), py::arg("weight"), py::arg("rstd"), py::arg("dy"),
      py::arg("dx"), py::arg("dweight"), py::kw_only(), py::arg("axis") = -1,
      "The gradients of rms_norm from its input x, weight and saved rstd: dx, and dweight summed "
      "over the rows. Returns (dx, dweight).");

  m.def(
      "cross_entropy",
      [](const PyBackend& b, const py::object& logits, const py::object& labels,
         const py::object& loss, const py::object& lse, const py::object& ignore_arg,
         double label_smoothing, const py::object& reduction_arg) {
        const char* op = "nn.cross_entropy";
        const int64_t ignore = int_arg(ignore_arg, op, "ignore_index");
        const nn::Reduction red = reduction_of(reduction_arg, op);
        const Operand ox = operand(b, logits, op, "logits"), ot = operand(b, labels, op, "labels"),
                      ol = operand(b, loss, op, "loss");
        const Operand os = stat_operand(b, lse, ox, op, "lse");
        run(b, {&ox, &ot, &ol, &os}, [&](const Backend& be) {
          nn::cross_entropy(be, ox.storage(), ot.storage(), ol.storage(), os.storage(), ignore,
                            label_smoothing, red);
        });
        return loss;
      },
      py::arg("backend"), py::arg("logits"), py::arg("labels"), py::arg("loss"),
      py::arg("lse") = py::none(), py::kw_only(), py::arg("ignore_index") = -100,
      py::arg("label_smoothing") = 0.0, py::arg("reduction") = "mean",
      "Softmax cross entropy of logits (rows x classes, the classes on the last axis) with int32 "
      "labels (one per row): per row (1 - s) (lse - x[label]) + s (lse - mean(x)), s = "
      "label_smoothing in [0, 1]; rows labelled ignore_index count for nothing, a label outside "
      "the classes gives NaN. loss: one per row ('none') or one element ('mean' over the rows "
      "not ignored, 'sum'). lse: each row's log-sum-exp (float32, float64 for float64 logits), "
      "saved for cross_entropy_grad; None saves nothing. Returns loss.");
  m.def(
      "cross_entropy_grad",
      [](const PyBackend& b, const py::object& logits, const py::object& labels,
         const py::object& lse, const py::object& dloss, const py::object& dlogits,
         const py::object& ignore_arg, double label_smoothing, const py::object& reduction_arg) {
        const char* op = "nn.cross_entropy_grad";
        const int64_t ignore = int_arg(ignore_arg, op, "ignore_index");
        const nn::Reduction red = reduction_of(reduction_arg, op);
        const Operand ox = operand(b, logits, op, "logits"), ot = operand(b, labels, op, "labels"),
                      os = operand(b, lse, op, "lse"), odl = operand(b, dloss, op, "dloss"),
                      odx = operand(b, dlogits, op, "dlogits");
        run(b, {&ox, &ot, &os, &odl, &odx}, [&](const Backend& be) {
          nn::cross_entropy_grad(be, ox.storage(), ot.storage(), os.storage(), odl.storage(),
                                 odx.storage(), ignore, label_smoothing, red);
        });
        return dlogits;
      },
      py::arg("backend"), py::arg("logits"), py::arg("labels"), py::arg("lse"), py::arg("dloss"),
      py::arg("dlogits"), py::kw_only(), py::arg("ignore_index") = -100,
      py::arg("label_smoothing") = 0.0, py::arg("reduction") = "mean",
      "The gradient of cross_entropy from the logits, labels and the forward's lse, and the "
      "loss's gradient dloss (the loss's shape): dlogits = g (softmax(x) - (1 - s) onehot - s / "
      "classes), g = dloss[row] ('none'), dloss ('sum') or dloss / the rows not ignored "
      "('mean'); ignored rows 0. Returns dlogits.");

  m.def(
      "batch_norm",
      [](const PyBackend& b, const py::object& x, const py::object& weight, const py::object& bias,
         const py::object& y, const py::object& running_mean, const py::object& running_var,
         const py::object& save_mean, const py::object& save_rstd, bool training, double momentum,
         double epsilon) {
        const char* op = "nn.batch_norm";
        const Operand ox = operand(b, x, op, "x"), ow = operand(b, weight, op, "weight"),
                      ob = operand(b, bias, op, "bias"), oy = operand(b, y, op, "y");
        const Operand orm = stat_operand(b, running_mean, ox, op, "running_mean"),
                      orv = stat_operand(b, running_var, ox, op, "running_var"),
                      osm = stat_operand(b, save_mean, ox, op, "save_mean"),
                      osr = stat_operand(b, save_rstd, ox, op, "save_rstd");
        run(b, {&ox, &ow, &ob, &oy, &orm, &orv, &osm, &osr}, [&](const Backend& be) {
          nn::batch_norm(be, ox.storage(), ow.storage(), ob.storage(), orm.storage(), orv.storage(),
                         oy.storage(), osm.storage(), osr.storage(), training, momentum, epsilon);
        });
        return py::make_tuple(y, save_mean, save_rstd);
      },
      py::arg("backend"), py::arg("x"), py::arg("weight"), py::arg("bias"), py::arg("y"),
      py::arg("running_mean") = py::none(), py::arg("running_var") = py::none(),
      py::arg("save_mean") = py::none(), py::arg("save_rstd") = py::none(), py::kw_only(),
      py::arg("training"), py::arg("momentum") = 0.1, py::arg("epsilon") = 1e-5,
      "Batch normalisation as torch.nn.BatchNorm: x is N x C x spatial (rank >= 2), the "
      "statistics per channel over N x spatial. weight, bias: one per channel. running_mean, "
      "running_var: one per channel (float32, float64 for float64 data) or None; training "
      "updates them in place with momentum (the variance unbiased), evaluation (training=False) "
      "normalises with them (both required). save_mean, save_rstd receive the mean and 1 / "
      "sqrt(var + epsilon) used, for batch_norm_grad; None saves nothing. Training needs more "
      "than one value per channel. Returns (y, save_mean, save_rstd).");
  m.def(
      "batch_norm_grad",
      [](const PyBackend& b, const py::object& x, const py::object& weight, const py::object& mean,
         const py::object& rstd, const py::object& dy, const py::object& dx,
         const py::object& dweight, const py::object& dbias, bool training) {
        const char* op = "nn.batch_norm_grad";
        const Operand ox = operand(b, x, op, "x"), ow = operand(b, weight, op, "weight"),
                      om = operand(b, mean, op, "mean"), orr = operand(b, rstd, op, "rstd"),
                      ody = operand(b, dy, op, "dy"), odx = operand(b, dx, op, "dx");
        const Operand odw = optional_operand(b, dweight, ox, op, "dweight"),
                      odb = optional_operand(b, dbias, ox, op, "dbias");
        run(b, {&ox, &ow, &om, &orr, &ody, &odx, &odw, &odb}, [&](const Backend& be) {
          nn::batch_norm_grad(be, ox.storage(), ow.storage(), om.storage(), orr.storage(),
                              ody.storage(), odx.storage(), odw.storage(), odb.storage(), training);
        });
        return py::make_tuple(dx, dweight, dbias);
      },
      py::arg("backend"), py::arg("x"), py::arg("weight"), py::arg("mean"), py::arg("rstd"),
      py::arg("dy"), py::arg("dx"), py::arg("dweight") = py::none(), py::arg("dbias") = py::none(),
      py::kw_only(), py::arg("training"),
      "The gradients of batch_norm from its input x, weight and saved mean and rstd: dx, and "
      "dweight and dbias summed over N x spatial (None: not computed). training as in the "
      "forward: True adds the batch statistics' own gradient to dx. Returns (dx, dweight, "
      "dbias).");
  m.def(
      "embedding",
      [](const PyBackend& b, const py::object& weight, const py::object& indices,
         const py::object& y, const py::object& padding_arg) {
        const char* op = "nn.embedding";
        const int64_t padding_idx = int_arg(padding_arg, op, "padding_idx");
        const Operand ow = operand(b, weight, op, "weight"),
                      oi = operand(b, indices, op, "indices");
        py::object out = y;
        if (out.is_none()) { // a new tensor of the shape of indices + [D], weight's dtype
          nn::Shape shape = oi.storage().shape();
          const nn::Shape& ws = ow.storage().shape();
          shape.push_back(ws.size() == 2 ? ws[1] : 0); // a bad weight: nn::embedding says why
          PyTensor t;
          t.storage = std::make_shared<TensorStorage>(ow.storage().dtype(), shape);
          out = py::cast(std::move(t));
        }
        const Operand oy = operand(b, out, op, "y");
        run(b, {&ow, &oi, &oy}, [&](const Backend& be) {
          nn::embedding(be, ow.storage(), oi.storage(), oy.storage(), padding_idx);
        });
        return out;
      },
      py::arg("backend"), py::arg("weight"), py::arg("indices"), py::arg("y") = py::none(),
      py::kw_only(), py::arg("padding_idx") = -1,
      "A table lookup: y[..., :] = weight[indices[...], :] with weight V x D and int32 indices "
      "of any shape; y has the shape of indices + (D,) (None: a new tensor). An index outside "
      "[0, V) gives a row of NaN. padding_idx (-1: none, else in [0, V)) does not change the "
      "forward. Returns y.");
  m.def(
      "embedding_grad",
      [](const PyBackend& b, const py::object& indices, const py::object& dy,
         const py::object& dweight, const py::object& padding_arg) {
        const char* op = "nn.embedding_grad";
        const int64_t padding_idx = int_arg(padding_arg, op, "padding_idx");
        const Operand oi = operand(b, indices, op, "indices"), ody = operand(b, dy, op, "dy");
        py::object out = dweight;
        if (!py::isinstance<PyTensor>(out) && !py::hasattr(out, "__dlpack__")) {
          // num_embeddings: a new V x D tensor, dy's dtype, D = dy's last extent
          const int64_t V = int_arg(out, op, "num_embeddings");
          if (V < 0)
            fail(errc::invalid_argument, op,
                 "argument num_embeddings: " + std::to_string(V) + ", expected >= 0");
          const nn::Shape& ds = ody.storage().shape();
          PyTensor t;
          t.storage = std::make_shared<TensorStorage>(
              ody.storage().dtype(), nn::Shape{V, ds.empty() ? int64_t{0} : ds.back()});
          out = py::cast(std::move(t));
        }
        const Operand odw = operand(b, out, op, "dweight");
        run(b, {&oi, &ody, &odw}, [&](const Backend& be) {
          nn::embedding_grad(be, oi.storage(), ody.storage(), odw.storage(), padding_idx);
        });
        return out;
      },
      py::arg("backend"), py::arg("indices"), py::arg("dy"), py::arg("num_embeddings"),
      py::kw_only(), py::arg("padding_idx") = -1,
      "The gradient of embedding with respect to its table: dweight (V x D, overwritten) row v = "
      "the sum of the dy rows (dy: the shape of indices + (D,)) at the positions whose index is "
      "v, added in increasing position order in float32 (float64 for float64) and rounded once, "
      "so every run and backend gives the same bits. padding_idx's row, rows never indexed and "
      "indices outside [0, V) give or add nothing. num_embeddings: V (a new tensor) or the "
      "dweight tensor to overwrite. Returns dweight.");
}

} // namespace parenchyma::python
