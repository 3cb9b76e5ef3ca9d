// coll_mock: a test bundle for the mock framework (plugins/mock) that starts its communicators
// from a unique id, as the NCCL bundle does, so that the front-end's ways of passing the id
// (parenchyma/coll.hpp: from_unique_id, rendezvous, the environment) run without a GPU. Ranks are
// threads of one process: comm_init_rank waits, as ncclCommInitRank does, until `size` ranks
// have joined with the same id (or fails after 20 s), and refuses a rank taken twice. Serves
// unique_id, comm_init_rank and barrier only. Built outside the plugin search path
// (tests/coll: test_coll_unique_id passes the directory).
#include <parenchyma/abi/ext/pcy_coll.h>
#include <parenchyma/sdk/op_schema.hpp>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace {

namespace sdk = parenchyma::sdk;
using sdk::str;

struct mock_context {
  const pcy_framework_api* fw = nullptr;
  int64_t* ptr(const pcy_tensor& t) const {
    return reinterpret_cast<int64_t*>(static_cast<char*>(sdk::native_of(*fw, t)) + t.byte_offset);
  }
};

// The joins in progress, by id.
struct join_state {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::vector<int64_t>, std::vector<int>> joined; // id -> the ranks that joined
  int64_t next_comm = 1;
};
join_state& joins() {
  static auto* s = new join_state;
  return *s;
}

void op_unique_id(mock_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_coll_unique_id_schema> dc(a, PCY_DTYPE_I64);
  const pcy_tensor& uid = dc.tensor(0);
  if (dc.elements(uid, 0) != PCY_COLL_UNIQUE_ID_WORDS)
    dc.bad(PCY_ERR_INVALID_ARGUMENT, 0, "expected PCY_COLL_UNIQUE_ID_WORDS elements");
  sdk::check(cx.fw->queue_finish(a.queue()));
  static std::mt19937_64 rng(std::random_device{}());
  static std::mutex rng_mu;
  std::lock_guard<std::mutex> lock(rng_mu);
  int64_t* p = cx.ptr(uid);
  for (int i = 0; i < PCY_COLL_UNIQUE_ID_WORDS; ++i)
    p[i] = static_cast<int64_t>(rng());
}

void op_comm_init_rank(mock_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_coll_comm_init_rank_schema> dc(a, PCY_DTYPE_I64);
  const pcy_tensor& info = dc.tensor(5);
  const int64_t rank = a.i(0), size = a.i(1);
  if (size < 1 || rank < 0 || rank >= size)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT, str("rank ", rank, " of ", size));
  const std::span<const int64_t> w = a.ints(4);
  if (w.size() != PCY_COLL_UNIQUE_ID_WORDS)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT, str("uid of ", w.size(), " words"));
  const std::vector<int64_t> id(w.begin(), w.end());
  sdk::check(cx.fw->queue_finish(a.queue()));
  join_state& s = joins();
  std::unique_lock<std::mutex> lock(s.mu);
  std::vector<int>& ranks = s.joined[id];
  for (int r : ranks)
    if (r == rank) sdk::fail(PCY_ERR_INVALID_ARGUMENT, str("rank ", rank, " joined twice"));
  ranks.push_back(static_cast<int>(rank));
  s.cv.notify_all();
  if (!s.cv.wait_for(lock, std::chrono::seconds(20),
                     [&] { return s.joined[id].size() >= static_cast<size_t>(size); }))
    sdk::fail(PCY_ERR_DEVICE, str("rank ", rank, " of ", size, ": only ", s.joined[id].size(),
                                  " ranks joined this id within 20 s"));
  int64_t* out = cx.ptr(info);
  out[PCY_COLL_INFO_ID] = s.next_comm++;
  out[PCY_COLL_INFO_RANK] = rank;
  out[PCY_COLL_INFO_SIZE] = size;
  out[PCY_COLL_INFO_LOCAL_RANK] = a.i(2) < 0 ? rank : a.i(2);
  out[PCY_COLL_INFO_LOCAL_SIZE] = a.i(3) < 1 ? size : a.i(3);
}

void op_barrier(mock_context&, const sdk::op_args&) {}

class coll_mock_bundle {
public:
  using context_type = mock_context;
  static constexpr const char* name = "coll_mock";
  static constexpr const char* version = "1.0";
  static constexpr const char* description = "test coll bundle for the mock framework (unique id)";
  static constexpr const char* extension = PCY_COLL_EXTENSION;
  static constexpr const char* framework = "mock";
  static constexpr uint32_t min_framework_abi_minor = 0;

  explicit coll_mock_bundle(const pcy_host_services&) {
    table_.add<op_unique_id>(pcy_coll_unique_id_schema, PCY_DTYPE_I64, "mock random words");
    table_.add<op_comm_init_rank>(pcy_coll_comm_init_rank_schema, PCY_DTYPE_I64,
                                  "mock join of threads");
    table_.add<op_barrier>(pcy_coll_barrier_schema, PCY_DTYPE_I64, "mock nothing");
  }
  std::span<const pcy_op_desc> ops() const { return table_.ops(); }
  context_type* create_context(const pcy_bundle_context_args& a) {
    auto* c = new mock_context;
    c->fw = a.framework;
    return c;
  }

private:
  sdk::op_table<coll_mock_bundle> table_;
};

} // namespace

PCY_BUNDLE_PLUGIN(coll_mock_bundle)
