package perf

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"
)

// watcherProc is the parent's handle on a watcher process.
type watcherProc struct {
	proc  *child
	stdin *os.File
	msgs  chan watcherMsg // decoded stdout lines; closed at EOF
}

// spawnWatcher starts a watcher process and returns once its watches are established.
func spawnWatcher(ctx context.Context, command []string, spec watcherSpec, logPath string) (*watcherProc, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout = inR, outW
	proc, err := startChild("watcher", cmd, logPath)
	inR.Close() // the child has its own copies
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, err
	}
	w := &watcherProc{proc: proc, stdin: inW, msgs: make(chan watcherMsg, 4)}
	go w.read(outR)
	if err := w.send(spec); err != nil {
		w.Stop()
		return nil, err
	}
	msg, err := w.next(ctx, 2*time.Minute)
	if err == nil && !msg.Ready {
		err = errors.New("watcher: did not report ready")
	}
	if err != nil {
		w.Stop()
		return nil, err
	}
	return w, nil
}

func (w *watcherProc) read(r *os.File) {
	defer close(w.msgs)
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 256<<20) // the latency list can be large
	for sc.Scan() {
		var m watcherMsg
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			m = watcherMsg{Err: fmt.Sprintf("watcher: bad output line: %v", err)}
		}
		w.msgs <- m
	}
}

func (w *watcherProc) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.stdin.Write(append(b, '\n'))
	return err
}

// next waits for the watcher's next message; a message carrying an error is returned as one.
func (w *watcherProc) next(ctx context.Context, timeout time.Duration) (watcherMsg, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case m, ok := <-w.msgs:
		switch {
		case !ok:
			<-w.proc.done
			return m, fmt.Errorf("watcher exited (%v): %s", w.proc.waitErr, w.proc.logTail())
		case m.Err != "":
			return m, errors.New(m.Err)
		}
		return m, nil
	case <-t.C:
		return watcherMsg{}, fmt.Errorf("watcher: no answer within %s: %s", timeout, w.proc.logTail())
	case <-ctx.Done():
		return watcherMsg{}, ctx.Err()
	}
}

// finish asks for the result once expect events arrived (or after timeout).
func (w *watcherProc) finish(ctx context.Context, expect int, timeout time.Duration) (*watcherResult, error) {
	if err := w.send(watcherCmd{Expect: expect, Timeout: timeout}); err != nil {
		return nil, fmt.Errorf("watcher: %w", err)
	}
	m, err := w.next(ctx, timeout+time.Minute)
	if err != nil {
		return nil, err
	}
	if m.Result == nil {
		return nil, errors.New("watcher: answer without result")
	}
	return m.Result, nil
}

func (w *watcherProc) Stop() {
	w.stdin.Close()
	w.proc.Stop(10 * time.Second)
}

// watchLatency writes cfg.WatchRate creates per second for cfg.WatchDuration, each value carrying its write
// start time, while a watcher process watches; it returns the delivery latencies.
func (r *runner) watchLatency(ctx context.Context, sys *system, rep int) WatchRep {
	var res WatchRep
	w, err := spawnWatcher(ctx, r.cfg.WatcherCommand, sys.watcherSpec(modeLatency, 1),
		r.path(fmt.Sprintf("%s-watch-latency-%d.log", sys.name, rep)))
	if err != nil {
		res.Err = err.Error()
		return res
	}
	defer w.Stop()
	bg := r.watchBackground(ctx)
	paced := r.pacedWrites(ctx, sys.t, fmt.Sprintf("r%d", rep))
	res.Background = bg.done(ctx)
	res.Writes, res.Rate = paced.ok, paced.rate
	res.WriteP50, res.WriteP99 = percentile(paced.lat, 50), percentile(paced.lat, 99)
	got, err := w.finish(ctx, paced.ok, 15*time.Second)
	switch {
	case err != nil:
		res.Err = err.Error()
		return res
	case paced.firstErr != nil:
		res.Err = fmt.Sprintf("%d writes failed, first: %v", paced.failed, paced.firstErr)
	case len(got.Errors) > 0:
		res.Err = fmt.Sprintf("watcher: %v", got.Errors)
	case got.Received != paced.ok:
		res.Err = fmt.Sprintf("watcher received %d events for %d writes", got.Received, paced.ok)
	}
	res.Received = got.Received
	res.P50, res.P99, res.Max = percentile(got.Latencies, 50), percentile(got.Latencies, 99), percentile(got.Latencies, 100)
	return res
}

type pacedResult struct {
	ok, failed int
	rate       float64
	lat        []time.Duration
	firstErr   error
}

// pacedWrites issues creates on a fixed schedule (open loop) from a pool of writers, so a slow write does not
// lower the offered rate.
func (r *runner) pacedWrites(ctx context.Context, t target, prefix string) pacedResult {
	n := int(float64(r.cfg.WatchRate) * r.cfg.WatchDuration.Seconds())
	interval := time.Second / time.Duration(r.cfg.WatchRate)
	jobs := make(chan int, n)
	var (
		mu  sync.Mutex
		res pacedResult
		wg  sync.WaitGroup
	)
	start := time.Now()
	for range 64 {
		wg.Go(func() {
			for i := range jobs {
				k := objKey{Resource: resWatch, Namespace: fmt.Sprintf("ns-%02d", i%namespaces), Name: fmt.Sprintf("ev-%s-%07d", prefix, i)}
				t0 := time.Now()
				_, err := t.Create(ctx, k, newValue(t0))
				d := time.Since(t0)
				mu.Lock()
				if err != nil {
					res.failed++
					res.firstErr = cmpErr(res.firstErr, err)
				} else {
					res.ok++
					res.lat = append(res.lat, d)
				}
				mu.Unlock()
			}
		})
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	res.rate = float64(res.ok) / time.Since(start).Seconds()
	return res
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// holdWatches opens cfg.Watches idle watches from a watcher process on a target holding the loaded objects,
// and reads the memory of the process serving them.
func (r *runner) holdWatches(ctx context.Context, sys *system, objects int) MemoryResult {
	res := MemoryResult{Target: sys.name, Objects: objects, Watches: r.cfg.Watches}
	w, err := spawnWatcher(ctx, r.cfg.WatcherCommand, sys.watcherSpec(modeHold, r.cfg.Watches), r.path(sys.name+"-watch-hold.log"))
	if err != nil {
		res.Err = err.Error()
		return res
	}
	defer w.Stop()
	settle := 3 * time.Second
	if r.cfg.Quick {
		settle = 500 * time.Millisecond
	}
	select {
	case <-time.After(settle):
	case <-ctx.Done():
		res.Err = ctx.Err().Error()
		return res
	}
	serverPID, process := sys.serverPID, sys.name+" server"
	if serverPID == 0 {
		serverPID, process = w.proc.pid(), "watcher process (store + watches)"
	}
	res.Process = process
	if res.ServerRSS, err = rssBytes(serverPID); err != nil {
		res.Err = err.Error()
	}
	res.WatcherRSS, _ = rssBytes(w.proc.pid())
	if sys.pgBacked && r.pg != nil {
		res.PostgresPSS = r.pg.procs().pss()
	}
	res.DataBytes = r.dataSize(ctx, sys)
	got, err := w.finish(ctx, 0, time.Second)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	res.WatcherHeap = got.HeapBytes
	if len(got.Errors) > 0 {
		res.Err = fmt.Sprintf("watcher: %v", got.Errors)
	}
	return res
}
