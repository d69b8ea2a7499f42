package perf

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/wheelhouse-dev/wheelhouse/scheduler"
)

// schedMeter measures the CPU this process, PostgreSQL (when pg is set) and every other process on the machine
// use between its creation and cores().
type schedMeter struct {
	pg           procGroup
	t0           time.Time
	h0, p0, all0 int64
}

func newSchedMeter(pg procGroup) *schedMeter {
	return &schedMeter{pg: pg, t0: time.Now(), h0: cpuTicks(os.Getpid(), false), p0: pg.ticks(), all0: machineBusyTicks()}
}

// cores is the CPU used so far divided by the wall time: average cores busy.
func (m *schedMeter) cores() SchedCPU {
	el := time.Since(m.t0).Seconds()
	if el <= 0 {
		return SchedCPU{}
	}
	h := float64(cpuTicks(os.Getpid(), false)-m.h0) / clockTick
	p := float64(m.pg.ticks()-m.p0) / clockTick
	all := float64(machineBusyTicks()-m.all0) / clockTick
	return SchedCPU{Harness: h / el, Postgres: p / el, Other: max(0, all-h-p) / el}
}

// heapNow is the heap in use and the live heap after two garbage collections (the second frees what the
// first's finalizers released).
func heapNow() (inuse, live int64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse), int64(ms.HeapAlloc)
}

// algoRun measures case c once with the scheduling algorithm alone: a scheduler.Simulator (the scheduler's
// configuration, framework, plugins and cache, without the API) with every node, then every pod scheduled one
// after the other as the scheduler's loop does, each placed (assumed) on its node before the next. The pods are
// built before the clock starts. After the timing it measures the heap the simulation holds.
func algoRun(ctx context.Context, cfg *SchedConfig, c string, rep int) SchedRun {
	out := SchedRun{Case: c, Rep: rep, Pods: cfg.measuredPods(c)}
	inuse0, live0 := heapNow()
	sim, err := scheduler.NewSimulator(nil)
	if err != nil {
		out.Err = err.Error()
		return out
	}
	for i := range cfg.Nodes {
		sim.AddNode(schedNode(i))
	}
	if c == SchedPreemption {
		for i := range cfg.Nodes {
			for j := range cfg.VictimsPerNode {
				if err := sim.AddPod(victimPod(i, j)); err != nil {
					out.Err = err.Error()
					return out
				}
			}
		}
	}
	pods := make([]*corev1.Pod, out.Pods)
	for i := range pods {
		pods[i] = schedPod(c, i)
	}
	meter := newSchedMeter(procGroup{})
	t0 := time.Now()
	for i, p := range pods {
		if i%256 == 0 && ctx.Err() != nil {
			out.Err = ctx.Err().Error()
			break
		}
		if err := algoPlace(ctx, sim, p, &out); err != nil {
			out.Err = err.Error()
			break
		}
	}
	out.Elapsed = time.Since(t0)
	out.CPU = meter.cores()
	out.Victims = len(sim.Victims)
	sim.Victims, pods = nil, nil
	inuse, live := heapNow()
	out.Heap, out.HeapLive = inuse-inuse0, live-live0
	runtime.KeepAlive(sim)
	return out
}

// errNotPlaced is a pod that no node would take, even after preemption.
var errNotPlaced = errors.New("pod not placed")

// algoPlace schedules one pod; a pod whose first cycle preempted (nominating a node) gets a second cycle, as the
// scheduler retries it once the victims are gone (the simulation removes them at once).
func algoPlace(ctx context.Context, sim *scheduler.Simulator, p *corev1.Pod, out *SchedRun) error {
	for range 2 {
		out.Cycles++
		node, msg, err := sim.Schedule(ctx, p)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		if node != "" {
			out.Scheduled++
			return nil
		}
		if !strings.Contains(msg, "nominated node") {
			return fmt.Errorf("%w: %s: %s", errNotPlaced, p.Name, msg)
		}
		out.Preemptions++
	}
	return fmt.Errorf("%w: %s: still unschedulable after preempting", errNotPlaced, p.Name)
}
