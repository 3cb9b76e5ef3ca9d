// Unit tests for parenchyma::error, errc, from_status and throw_if (the host side of the
// exception firewall: every pcy_error is turned into an exception and freed exactly once).
#include "loader/testing.hpp"
#include "support/catch.hpp"

#include <parenchyma/error.hpp>
#include <parenchyma/sdk/common.hpp>

#include <set>
#include <string>

using namespace parenchyma;

TEST_CASE("error carries code, origin and message; what() is \"origin: message\"") {
  const error e(errc::config, "config /etc/x.json", "unknown key 'rankin'");
  CHECK(e.code() == errc::config);
  CHECK(e.origin() == "config /etc/x.json");
  CHECK(e.message() == "unknown key 'rankin'");
  CHECK(std::string(e.what()) == "config /etc/x.json: unknown key 'rankin'");
  const std::runtime_error& base = e; // catchable as a standard exception
  CHECK(std::string(base.what()) == e.what());
}

TEST_CASE("every errc has a distinct name") {
  std::set<std::string> names;
  for (errc c : {errc::invalid_argument, errc::unsupported, errc::out_of_memory, errc::device,
                 errc::build, errc::not_found, errc::version, errc::unavailable, errc::internal,
                 errc::launch, errc::config, errc::uninitialized, errc::plugin}) {
    const char* n = to_string(c);
    REQUIRE(n != nullptr);
    CHECK(std::string(n).size() > 0);
    names.insert(n);
  }
  CHECK(names.size() == 13);
}

TEST_CASE("from_status maps every ABI status to its errc") {
  CHECK(from_status(PCY_ERR_INVALID_ARGUMENT) == errc::invalid_argument);
  CHECK(from_status(PCY_ERR_UNSUPPORTED) == errc::unsupported);
  CHECK(from_status(PCY_ERR_OUT_OF_MEMORY) == errc::out_of_memory);
  CHECK(from_status(PCY_ERR_DEVICE) == errc::device);
  CHECK(from_status(PCY_ERR_BUILD) == errc::build);
  CHECK(from_status(PCY_ERR_NOT_FOUND) == errc::not_found);
  CHECK(from_status(PCY_ERR_VERSION) == errc::version);
  CHECK(from_status(PCY_ERR_UNAVAILABLE) == errc::unavailable);
  CHECK(from_status(PCY_ERR_INTERNAL) == errc::internal);
  CHECK(from_status(PCY_ERR_LAUNCH) == errc::launch);
}

namespace {
int g_destroyed = 0;
char g_message[] = "the fake device fell over";
char g_origin[] = "fakeplugin";
} // namespace

TEST_CASE("throw_if turns a pcy_error into an error and frees it exactly once") {
  CHECK_NOTHROW(throw_if(nullptr));
  CHECK_NOTHROW(throw_if(nullptr, "context"));

  g_destroyed = 0;
  pcy_error e{sizeof(pcy_error), nullptr,  PCY_ERR_DEVICE,
              g_message,         g_origin, [](pcy_error*) { ++g_destroyed; }};
  try {
    throw_if(&e, "reading tensor [3]");
    FAIL("throw_if did not throw");
  } catch (const error& x) {
    CHECK(x.code() == errc::device);
    CHECK(x.origin() == "fakeplugin");
    CHECK(pcy_test::contains(x.message(), "the fake device fell over"));
    CHECK(pcy_test::contains(x.message(), "reading tensor [3]"));
    CHECK(pcy_test::contains(x.what(), "fakeplugin: "));
  }
  CHECK(g_destroyed == 1);
}

TEST_CASE("an SDK-made error crosses back with the plugin's origin") {
  pcy_error* e = parenchyma::sdk::make_error(PCY_ERR_BUILD, "line 3: syntax error", "opencl");
  REQUIRE(e != nullptr);
  try {
    throw_if(e);
    FAIL("throw_if did not throw");
  } catch (const error& x) {
    CHECK(x.code() == errc::build);
    CHECK(x.origin() == "opencl");
    CHECK(x.message() == "line 3: syntax error");
    CHECK(std::string(x.what()) == "opencl: line 3: syntax error");
  }
}

TEST_CASE("an op's name is said once: throw_if does not repeat a context the message opens with") {
  // The SDK's argument checks open their messages with the op ("nn.lrn: argument n: ..."), and
  // the core passes the op as the context: the two once read "nn.lrn: nn.lrn: argument n".
  pcy_error* e = parenchyma::sdk::make_error(PCY_ERR_INVALID_ARGUMENT,
                                             "nn.lrn: argument n: 0 is not >= 1", "nn_native");
  try {
    throw_if(e, "nn.lrn");
    FAIL("throw_if did not throw");
  } catch (const error& x) {
    CHECK(std::string(x.what()) == "nn_native: nn.lrn: argument n: 0 is not >= 1");
  }
  // A message without it still gets the context; one that merely starts alike does too.
  for (const char* m : {"argument n: 0 is not >= 1", "nn.lrn_grad: argument n"}) {
    try {
      throw_if(parenchyma::sdk::make_error(PCY_ERR_INVALID_ARGUMENT, m, "nn_native"), "nn.lrn");
      FAIL("throw_if did not throw");
    } catch (const error& x) {
      CHECK(std::string(x.what()) == std::string("nn_native: nn.lrn: ") + m);
    }
  }
}

TEST_CASE("the SDK firewall turns every exception kind into a pcy_error") {
  auto run = [](auto f) { return parenchyma::sdk::guard("plug", f); };
  pcy_error* a = run([] { parenchyma::sdk::fail(PCY_ERR_NOT_FOUND, "no kernel 'k'"); });
  pcy_error* b = run([] { throw std::runtime_error("boom"); });
  pcy_error* c = run([] { throw 42; });
  pcy_error* d = run([] {});
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  REQUIRE(c != nullptr);
  CHECK(d == nullptr);
  CHECK(a->code == PCY_ERR_NOT_FOUND);
  CHECK(std::string(a->message) == "no kernel 'k'");
  CHECK(b->code == PCY_ERR_INTERNAL);
  CHECK(pcy_test::contains(b->message, "boom"));
  CHECK(c->code == PCY_ERR_INTERNAL);
  for (pcy_error* e : {a, b, c}) {
    CHECK(std::string(e->origin) == "plug");
    e->destroy(e);
  }
}
