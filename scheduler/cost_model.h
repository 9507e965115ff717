// The cost of a task on one worker (one SM): a prefetch part that does not wait for events
// (task overhead + the first prefetch_bytes of its weights and KV history at the SM's share of
// DRAM read bandwidth) and a part after the events fire (a fixed latency + the rest of the
// weights + activation reads at the L2 share + flops at the SM's rate). The megakernel starts
// only the beginning of a tile's stream before its events: prefetching whole tiles of a wave
// would overflow L2.
#pragma once

#include "scheduler/task_graph.h"

namespace mpk::sched {

// H200-like defaults (sm_90a, 132 SMs).
struct CostModel {
  double read_bytes_per_s = 4.6e12;   // DRAM read stream (DESIGN.md: measured ~4.6 TB/s)
  double l2_bytes_per_s = 12e12;      // activations: small, written just before, L2-resident
  double flops_per_s_per_sm = 0.5e12; // fp32 FMA on CUDA cores (T = 1 GEMV does not use MMA)
  int num_sms = 132;
  double task_overhead_s = 1.0e-6;    // dispatch and ramp of a task's first loads
  double event_latency_s = 1.0e-6;    // trigger -> visible to a polling waiter -> first read
  // After the events: stage the input, reduce, publish (an H200 spends 2.5-5 us on a small tile).
  double post_event_latency_s = 2.5e-6;
  // Streamed before the events: what the megakernel starts before a wait (a round of loads
  // per warp, 64 KB on 16 warps, and an L2 prefetch of 32 KB), rounded to the 128 KB the
  // measured schedules were made with.
  double prefetch_bytes = 128.0 * 1024;
};

struct TaskCost {
  double prefetch_s = 0;  // may run before the task's events are ready
  double compute_s = 0;   // runs after they are
  double total() const { return prefetch_s + compute_s; }
};

// With more workers than SMs the device bandwidth and SMs are shared among all workers.
TaskCost task_cost(const Task& task, const CostModel& cost, int num_workers);

// Bytes that do not wait (weights + KV history) over the whole device's read bandwidth.
double bytes_bound_s(const TaskGraph& tasks, const CostModel& cost);

}  // namespace mpk::sched
