// Package perf holds five reproducible performance harnesses. The first compares the Wheelhouse store (store/) with
// etcd and kine, side by side on one machine with one workload. It is its own Go module so that the etcd client
// never enters the main module. The program is cmd/storeperf; its report is docs/perf.md.
//
// One run:
//   - starts a private PostgreSQL (store/pgserver, durable defaults), applies the migrations and opens a
//     store.Store in process; starts a single-member etcd (Debian's etcd-server, apt-installed when missing and
//     running as root); builds kine once (go install, cached) and runs it against the same PostgreSQL in its own
//     database;
//   - measures creates/s and compare-and-swap updates/s at several writer counts (median of repetitions, the
//     targets interleaved within each repetition), watch latency from write start to delivery in another process
//     (the harness re-executes itself as `storeperf watcher`), unpaginated lists of growing object counts, and the
//     memory of the process serving many open watches;
//   - reruns the PostgreSQL-backed throughput points once with pg_stat_statements and wait-event sampling, so the
//     report can say what limits them;
//   - writes markdown (Report) and optionally JSON, and removes every process and directory it started, also on
//     error or cancellation (Ctrl-C). Children also die with the harness (Pdeathsig).
//
// The second program, cmd/apiperf (RunAPI), measures the Kubernetes API of the real server binary with its watch
// cache on and off: it builds ./cmd/wheelhouse once, runs one server per target on its own database of one
// private PostgreSQL, and times open-loop pod creates, lists of many pods (JSON, Table, paged) and a watch
// fan-out from client-go, with the CPU and memory of each process. It writes only its own block of
// docs/perf.md (APIReport, WriteAPIReport); storeperf keeps that block when it rewrites the file.
//
// The third, cmd/schedperf (RunSched), measures the scheduler in the harness process: the algorithm alone
// (scheduler.Simulator) for plain, topology-spread, anti-affinity and preemption pods; the same cases end to end
// (apitest.Start on a fresh database of a private PostgreSQL, nodes and pods created through client-go, then
// the scheduler timed from its start until its Scheduled counter covers every pod); a Deployment's rollout with
// every controller running; and the heap the scheduler's cache holds. It writes its own block (SchedReport,
// WriteSchedReport) and returns ErrSchedRunsFailed, after writing, when a measurement did not place every pod.
//
// The fourth, cmd/agentperf (RunAgent), measures the node agent with the real binary: pod startup latency on
// real agents (process runtime, each in a network namespace of its own), one agent's memory with many pods,
// the process runtime and containerd side by side (one agent each, containerd started by
// agents/runtime/cri/containerdtest in its agent's namespace: pod startup latency, CPU and memory of the agent,
// containerd and the shims), and the server's CPU and memory under many hollow nodes (`wheelhouse agent
// --hollow N`) running a large Deployment. It writes its own block (AgentReport, WriteAgentReport).
//
// The fifth, cmd/dashperf (RunDash), measures the dashboard with the real binary: write-to-DOM latency in
// headless Chromium, the pods page at 10,000 pods, memory per connected tab and 200 websocket tabs under pod
// churn. It writes its own block.
//
// Guarantees: no harness turns off durability (no fsync=off, no unsafe etcd flags); every target sees the
// same keys, value sizes and operation mix; a target that cannot be started is reported with the reason and the
// others are still measured. Numbers are only comparable within one run.
package perf
