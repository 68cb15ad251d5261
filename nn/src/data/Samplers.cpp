// Sequential, random and distributed sample orders.
#include "weft/data/Samplers.h"

#include "weft/Functions.h"

#include <numeric>

namespace weft::data {
namespace {

/// randperm(size) drawn at offset `epoch` of the stream `seed`: one draw per epoch.
std::vector<size_t> permutation(size_t size, uint64_t seed, uint64_t epoch) {
  Generator gen(seed);
  gen.set_offset(epoch);
  std::vector<int64_t> perm = randperm(static_cast<int64_t>(size), gen).to_vector<int64_t>();
  return {perm.begin(), perm.end()};
}

} // namespace

std::vector<size_t> SequentialSampler::indices(size_t size, uint64_t) const {
  std::vector<size_t> out(size);
  std::iota(out.begin(), out.end(), size_t{0});
  return out;
}

std::vector<size_t> RandomSampler::indices(size_t size, uint64_t epoch) const {
  return permutation(size, seed_, epoch);
}

DistributedSampler::DistributedSampler(size_t num_replicas, size_t rank, bool shuffle,
                                       uint64_t seed, std::source_location loc)
    : numReplicas_(num_replicas), rank_(rank), shuffle_(shuffle), seed_(seed) {
  CallSite cs(loc);
  WEFT_CHECK(num_replicas >= 1, Value, "DistributedSampler: num_replicas must be at least 1");
  WEFT_CHECK(rank < num_replicas, Value, "DistributedSampler: rank ", rank, " is out of range for ",
             num_replicas, " replicas (0 <= rank < num_replicas)");
}

std::vector<size_t> DistributedSampler::indices(size_t size, uint64_t epoch) const {
  if (size == 0) return {};
  std::vector<size_t> order =
      shuffle_ ? permutation(size, seed_, epoch) : SequentialSampler().indices(size, epoch);
  // As PyTorch: pad to a multiple of the replica count by repeating the order from its start.
  const size_t perReplica = (size + numReplicas_ - 1) / numReplicas_;
  std::vector<size_t> shard;
  shard.reserve(perReplica);
  for (size_t k = 0; k < perReplica; ++k)
    shard.push_back(order[(rank_ + k * numReplicas_) % size]);
  return shard;
}

} // namespace weft::data
