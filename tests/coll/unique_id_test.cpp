// The front-end's ways of passing a unique id (parenchyma/coll.hpp), as the NCCL bundle needs,
// without a GPU: a test bundle for the mock framework (mock/coll_mock.cpp) starts communicators
// from an id and, like ncclCommInitRank, returns only once `size` ranks joined with the same id;
// ranks are threads, each with its own mock backend. An isolated registry (the mock, that bundle
// and the native framework, no MPI bundle).
#include "loader/testing.hpp"
#include "support/catch.hpp"

#include <parenchyma/coll.hpp>
#include <parenchyma/parenchyma.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace pa = parenchyma;
namespace fs = std::filesystem;

namespace {

pa::Registry& registry() {
  static pa::Registry reg(
      pcy_test::isolated({PCY_TEST_MOCK_DIR, PCY_TEST_COLL_MOCK_DIR, pcy_test::native_plugin()}));
  return reg;
}

fs::path fresh(const char* name) {
  const fs::path p = fs::temp_directory_path() / (std::string("pcy-coll-") + name + "-" +
                                                  std::to_string(std::random_device{}()));
  fs::remove(p);
  return p;
}

// Unsets the rendezvous environment when a test ends.
struct env_guard {
  ~env_guard() {
    for (const char* v : {PCY_COLL_RENDEZVOUS_SETTING, PCY_COLL_RANK_SETTING, PCY_COLL_SIZE_SETTING,
                          PCY_COLL_TIMEOUT_SETTING, "OMPI_COMM_WORLD_SIZE"})
      unsetenv(v);
  }
};

} // namespace

TEST_CASE("uses_unique_id reads the backend's own bundle", "[coll][unique_id]") {
  pa::Backend mock(registry(), "mock"), native(registry(), "native");
  CHECK(pa::coll::Communicator::uses_unique_id(mock));
  CHECK_FALSE(pa::coll::Communicator::uses_unique_id(native));
}

TEST_CASE("from_unique_id: one rank, and the ids differ", "[coll][unique_id]") {
  pa::Backend b(registry(), "mock");
  const auto id = pa::coll::Communicator::unique_id(b);
  CHECK(id != pa::coll::Communicator::unique_id(b));
  const auto c = pa::coll::Communicator::from_unique_id(b, id, 0, 1);
  CHECK(c.rank() == 0);
  CHECK(c.size() == 1);
  CHECK(c.local_size() == 1);
  c.barrier();
}

TEST_CASE("rendezvous: four ranks find one id through a file, which rank 0 then removes",
          "[coll][unique_id]") {
  const fs::path path = fresh("rv");
  constexpr int n = 4;
  std::vector<int> rank(n, -1), size(n, -1);
  std::vector<std::string> errors(n);
  std::vector<std::thread> ts;
  // Rank 0 starts last: the others poll for the file first.
  for (int r = n - 1; r >= 0; --r) {
    ts.emplace_back([&, r] {
      try {
        pa::Backend b(registry(), "mock");
        const auto c = pa::coll::Communicator::rendezvous(b, path.string(), r, n);
        rank[static_cast<size_t>(r)] = c.rank();
        size[static_cast<size_t>(r)] = c.size();
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (auto& t : ts)
    t.join();
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << ": " << errors[static_cast<size_t>(r)]);
    CHECK(errors[static_cast<size_t>(r)].empty());
    CHECK(rank[static_cast<size_t>(r)] == r);
    CHECK(size[static_cast<size_t>(r)] == n);
  }
  CHECK_FALSE(fs::exists(path));
}

TEST_CASE("Communicator(backend): the rendezvous from the environment, else one rank alone",
          "[coll][unique_id]") {
  env_guard guard;
  pa::Backend b(registry(), "mock");
  const fs::path path = fresh("env");
  setenv(PCY_COLL_RENDEZVOUS_SETTING, path.string().c_str(), 1);
  setenv(PCY_COLL_RANK_SETTING, "0", 1);
  setenv(PCY_COLL_SIZE_SETTING, "1", 1);
  {
    const pa::coll::Communicator c(b);
    CHECK(c.rank() == 0);
    CHECK(c.size() == 1);
    CHECK_FALSE(fs::exists(path));
  }
  setenv(PCY_COLL_RANK_SETTING, "one", 1);
  try {
    const pa::coll::Communicator c(b);
    FAIL("a rank that is no number was taken");
  } catch (const pa::error& e) {
    CHECK(e.code() == pa::errc::invalid_argument);
    CHECK(pcy_test::contains(e.what(), PCY_COLL_RANK_SETTING));
  }
  unsetenv(PCY_COLL_RENDEZVOUS_SETTING);
  // No rendezvous and no MPI bundle in this registry: one rank alone...
  {
    const pa::coll::Communicator c(b);
    CHECK(c.size() == 1);
  }
  // ... unless a launcher says it started more.
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  try {
    const pa::coll::Communicator c(b);
    FAIL("a lone rank was made although the launcher started 2");
  } catch (const pa::error& e) {
    CHECK(e.code() == pa::errc::unavailable);
    CHECK(pcy_test::contains(e.what(), PCY_COLL_RENDEZVOUS_SETTING));
  }
}

TEST_CASE("rendezvous: a rank whose rank 0 never comes times out, naming the file",
          "[coll][unique_id]") {
  env_guard guard;
  setenv(PCY_COLL_TIMEOUT_SETTING, "0.3", 1);
  pa::Backend b(registry(), "mock");
  const fs::path path = fresh("none");
  try {
    pa::coll::Communicator::rendezvous(b, path.string(), 1, 2);
    FAIL("the rendezvous returned without rank 0");
  } catch (const pa::error& e) {
    CHECK(e.code() == pa::errc::device);
    CHECK(pcy_test::contains(e.what(), path.string()));
    CHECK(pcy_test::contains(e.what(), "rank 1"));
  }
}
