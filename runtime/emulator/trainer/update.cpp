// PhaseTrainer::Impl, the optimizer update (trainer/impl.h; the arithmetic
// is runtime/emulator/optimizer.h): every slot in fixed chunks over the host
// threads, its state staged through Streaming Memory when it lives there, the
// weights through Streaming Memory when phased, and the all-gather of the
// updated weights with RTS.
#include "runtime/emulator/trainer/impl.h"

#include <algorithm>

#include "runtime/emulator/counter_rng.h"

namespace ipu::emu {

using namespace trainer;

void PhaseTrainer::Impl::update(double lr, float gradScale) {
  const ir::Optimizer& opt = plan.optimizer;
  auto excluded = [&](int pid) {
    const ir::ParamClass cls = model->params()[static_cast<std::size_t>(pid)].spec.cls;
    return std::find(opt.exclude.begin(), opt.exclude.end(), cls) != opt.exclude.end();
  };
  auto settingsFor = [&](const Slot& s) {
    UpdateSettings us;
    us.optimizer = &opt;
    us.lr = lr;
    us.t = updates;
    us.gradScale = gradScale;
    us.excluded = excluded(s.param);
    us.fp16Weights = fp16Weights;
    us.fp16State = fp16State;
    us.stochastic = stochastic;
    // Keyed by the tensor, never by the replica or IPU holding it: every copy
    // (replicas, tied copies) draws the same bits and stays identical.
    us.key = subKey(subKey(subKey(phaseKey, 0x0B7ULL + static_cast<std::uint64_t>(step)), static_cast<std::uint64_t>(s.param)),
                    static_cast<std::uint64_t>(s.shard + 1));
    return us;
  };
  // The work: chunks of kUpdateChunk elements of every slot, all groups at
  // once (a slot whose state is in Streaming Memory is one item: its state
  // moves as a whole). The chunks are fixed by the sizes, and a chunk's
  // elements draw the same random positions as in a whole-tensor update, so
  // the threads change nothing; LAMB's and LARS's sums add the chunks' partial
  // sums in order.
  constexpr std::size_t kUpdateChunk = std::size_t{1} << 16;
  struct Item {
    std::size_t group, slot, begin, end;   // [begin, end) within the slot's owned range
    bool whole;                            // Streaming Memory: every chunk, in order, in one item
  };
  // As MPI instances, each instance updates only its own replicas' copies:
  // without RTS every replica's update is the same arithmetic on the same
  // reduced gradients, and another instance's copies are never read here
  // (its passes run there; checkpoints and evaluation read this instance's
  // own replicas). With RTS each replica updates its own shard and the
  // all-gather below needs them all, so every copy is updated.
  auto mine = [&](const Group& gr) { return rts || local(gr.replica); };
  // Phased: the weights come from Streaming Memory for the update and go
  // back; each replica reads its share (with RTS) and writes back what it keeps.
  const double wb = fp16Weights ? 2 : 4, ab = fp16Acc ? 2 : 4;
  if (phased)
    pool->run(groups.size(), [&](std::size_t i) {
      Group& gr = groups[i];
      if (!mine(gr)) return;
      for (auto& s : gr.slots) {
        s.value = s.home;
        const double share = static_cast<double>(s.owned.end - s.owned.begin);
        forIpusOf(gr, s, [&](std::size_t ip) { traffic.streamed[static_cast<std::size_t>(gr.replica)][ip].update += share * (wb + ab); });
      }
    });
  std::vector<Item> items;
  for (std::size_t i = 0; i < groups.size(); ++i)
    for (std::size_t j = 0; j < groups[i].slots.size() && mine(groups[i]); ++j) {
      Slot& s = groups[i].slots[j];
      const std::size_t n = s.owned.end - s.owned.begin;
      if (needsTrustRatio(opt) && s.scratch.size() < n) s.scratch.resize(n);
      if (s.streamed >= 0) {
        items.push_back({i, j, 0, n, true});
        continue;
      }
      std::size_t b = 0;
      do {
        items.push_back({i, j, b, std::min(n, b + kUpdateChunk), false});
        b += kUpdateChunk;
      } while (b < n);
    }
  // Run f on each fixed chunk of an item.
  auto chunks = [&](const Item& it, const std::function<void(const Item&)>& f) {
    if (!it.whole) {
      f(it);
      return;
    }
    std::size_t b = it.begin;
    do {
      f({it.group, it.slot, b, std::min(it.end, b + kUpdateChunk), false});
      b += kUpdateChunk;
    } while (b < it.end);
  };
  auto span = [&](Slot& s, OptimizerState& st, const Item& it) {
    UpdateSpan sp;
    sp.value = s.value.data() + s.owned.begin + it.begin;
    sp.grad = s.grad.data() + s.owned.begin + it.begin;
    sp.n = it.end - it.begin;
    sp.offset = s.owned.begin + it.begin;
    sp.state = &st;
    sp.first = it.begin;
    sp.u = &s.scratch;
    return sp;
  };
  // Streaming Memory: state moves to a staging buffer for the update and
  // back; returns the bytes moved. Each pass moves only what it uses: LAMB's
  // first pass (the norms) updates the moments and reads the master weights,
  // its second writes the weights; LARS's first pass only reads the weights,
  // its second updates the momentum and the weights. The master weights come
  // along whenever a pass reads the weights (they are the weights then).
  enum Part : unsigned { kMoments = 1, kMaster = 2, kAll = 3 };
  auto withState = [&](Group& gr, Slot& s, unsigned in, unsigned out, const std::function<void(OptimizerState&)>& f) {
    if (s.streamed < 0) {
      f(s.state);
      return 0.0;
    }
    const double mb = fp16State ? 2 : 4;
    OptimizerState& stored = gr.streaming[static_cast<std::size_t>(s.streamed)];
    OptimizerState staging;
    double moved = 0;
    if (in & kMoments) {
      staging.m = stored.m;
      staging.v = stored.v;
      moved += static_cast<double>(stored.m.size() + stored.v.size()) * mb;
    }
    if (in & kMaster) {
      staging.master = stored.master;
      moved += static_cast<double>(stored.master.size()) * 4;
    }
    f(staging);
    if (out & kMoments) {
      moved += static_cast<double>(staging.m.size() + staging.v.size()) * mb;
      stored.m = std::move(staging.m);
      stored.v = std::move(staging.v);
    }
    if (out & kMaster) {
      moved += static_cast<double>(staging.master.size()) * 4;
      stored.master = std::move(staging.master);
    }
    return moved;
  };
  const bool lamb = opt.kind == ir::OptimizerKind::Lamb;
  const unsigned firstIn = lamb ? kAll : kMaster, firstOut = lamb ? kMoments : 0u;
  const unsigned secondIn = needsTrustRatio(opt) ? (lamb ? kMaster : kAll) : kAll;
  std::vector<double> moved(items.size(), 0.0);
  const bool twoPass = needsTrustRatio(opt);
  if (twoPass) {
    std::vector<NormSums> partial(items.size());
    pool->run(items.size(), [&](std::size_t w) {
      const Item& it = items[w];
      Group& gr = groups[it.group];
      Slot& s = gr.slots[it.slot];
      const UpdateSettings us = settingsFor(s);
      moved[w] += withState(gr, s, firstIn, firstOut, [&](OptimizerState& st) {
        chunks(it, [&](const Item& c) { partial[w] += prepare(us, span(s, st, c)); });
      });
    });
    for (auto& gr : groups)
      for (auto& s : gr.slots) s.sums = NormSums{};
    for (std::size_t w = 0; w < items.size(); ++w) groups[items[w].group].slots[items[w].slot].sums += partial[w];
  }
  pool->run(items.size(), [&](std::size_t w) {
    const Item& it = items[w];
    Group& gr = groups[it.group];
    Slot& s = gr.slots[it.slot];
    const UpdateSettings us = settingsFor(s);
    double ratio = 1;
    if (twoPass) {
      // The whole tensor's sums: its shards on this group, and with RTS every replica's chunk.
      NormSums total;
      for (int r = 0; r < (rts ? R : 1); ++r) {
        const Group& src = rts ? group(r, gr.ipu) : gr;
        for (const auto& o : src.slots)
          if (o.param == s.param) total += o.sums;
      }
      ratio = trustRatio(us, total);
    }
    moved[w] += withState(gr, s, secondIn, secondIn, [&](OptimizerState& st) { chunks(it, [&](const Item& c) { apply(us, ratio, span(s, st, c)); }); });
  });
  for (std::size_t w = 0; w < items.size(); ++w) {
    const Group& gr = groups[items[w].group];
    const Slot& s = gr.slots[items[w].slot];
    forIpusOf(gr, s, [&](std::size_t ip) { traffic.streamed[static_cast<std::size_t>(gr.replica)][ip].optimizerState += moved[w]; });
  }
  // With the weights sharded in Streaming Memory, each replica writes back its
  // share and the segments gather them as they load: no all-gather here.
  if (rts && !rtsStreamed) {
    // Every replica updated its chunk; all-gather the new weights.
    countCollective(traffic.gathered, ir::bytesOf(plan.precision.weights));
    std::vector<Key2> work;
    for (int g = 0; g < P; ++g)
      for (std::size_t j = 0; j < group(0, g).slots.size(); ++j) work.push_back({g, static_cast<int>(j)});
    pool->run(work.size(), [&](std::size_t w) {
      const int g = work[w].first;
      const std::size_t j = static_cast<std::size_t>(work[w].second);
      std::vector<float*> bufs;
      for (int r = 0; r < R; ++r) bufs.push_back(group(r, g).slots[j].value.data());
      ringAllGather(bufs, static_cast<std::size_t>(group(0, g).slots[j].value.size()));
    });
  }
  if (phased)
    pool->run(groups.size(), [&](std::size_t i) {
      Group& gr = groups[i];
      if (!mine(gr)) return;
      for (auto& s : gr.slots) {
        const std::size_t b = rtsStreamed ? s.owned.begin : 0, e = rtsStreamed ? s.owned.end : static_cast<std::size_t>(s.value.size());
        std::copy(s.value.data() + b, s.value.data() + e, s.home.data() + b);
        s.value = Mat();
        forIpusOf(gr, s, [&](std::size_t ip) { traffic.streamed[static_cast<std::size_t>(gr.replica)][ip].update += static_cast<double>(e - b) * wb; });
      }
    });
}

}  // namespace ipu::emu
