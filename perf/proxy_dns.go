package perf

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"

	whdns "github.com/wheelhouse-dev/wheelhouse/agents/dns"
)

// The DNS scenario's query kinds.
const (
	dnsKindA        = "A, Service with a cluster IP"
	dnsKindHeadless = "A, headless Service"
	dnsKindNX       = "NXDOMAIN, unknown Service"
)

// dnsQueries are one kind's queries, packed, and what every answer must be.
type dnsQueries struct {
	kind    string
	packed  [][]byte
	rcode   int
	answers int
}

// dnsScenario serves an Index of DNSServices Services on loopback and loads it with every query kind and
// number of senders.
func (r *proxyRunner) dnsScenario(ctx context.Context) *ProxyDNSResult {
	cfg := r.cfg
	out := &ProxyDNSResult{Services: cfg.DNSServices, Headless: cfg.DNSHeadless, Endpoints: cfg.Endpoints,
		CPUs: runtime.NumCPU(), Duration: cfg.DNSDuration}
	every := 0
	if cfg.DNSHeadless > 0 {
		every = cfg.DNSServices / cfg.DNSHeadless
	}
	objs := makeProxyObjects(0, cfg.DNSServices, cfg.Endpoints, every)
	x := whdns.NewIndex()
	for i, svc := range objs.services {
		x.UpsertService(svc)
		x.UpsertEndpointSlice(objs.slices[i])
	}
	srv, err := whdns.New(ctx, whdns.Config{Listen: "127.0.0.1:0", NoForward: true}, x)
	if err != nil {
		out.Err = err.Error()
		return out
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Start(sctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil && out.Err == "" {
			out.Err = err.Error()
		}
	}()
	for _, q := range dnsQuerySets(objs, every, cfg.Endpoints) {
		for _, k := range cfg.DNSSenders {
			if ctx.Err() != nil {
				out.Err = ctx.Err().Error()
				return out
			}
			run := dnsLoad(ctx, srv.Addr().String(), q, k, cfg.DNSDuration)
			r.log.Info("dns", "kind", q.kind, "senders", k, "qps", int(run.QPS), "p99", run.P99, "errors", run.Errors)
			out.Runs = append(out.Runs, run)
		}
	}
	return out
}

// dnsQuerySets are the queries of each kind: every Service of the kind by name, and as many unknown names.
func dnsQuerySets(objs proxyObjects, headlessEvery, endpoints int) []dnsQueries {
	sets := []dnsQueries{{kind: dnsKindA, answers: 1}, {kind: dnsKindHeadless, answers: endpoints}, {kind: dnsKindNX, rcode: dns.RcodeNameError}}
	for i, svc := range objs.services {
		name := svc.Name + "." + svc.Namespace + ".svc.cluster.local."
		set := &sets[0]
		if headlessEvery > 0 && i%headlessEvery == 0 {
			set = &sets[1]
		}
		set.packed = append(set.packed, packQuery(name))
		sets[2].packed = append(sets[2].packed, packQuery("no-"+name))
	}
	return slices.DeleteFunc(sets, func(s dnsQueries) bool { return len(s.packed) == 0 })
}

func packQuery(name string) []byte {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	b, err := m.Pack()
	if err != nil {
		panic(fmt.Sprintf("pack %s: %v", name, err)) // names made above: a bug
	}
	return b
}

// dnsLoad runs senders concurrent senders, each with its own UDP socket and one query outstanding, cycling
// through the queries from its own offset, for d; each answer's ID, rcode and answer count are checked from its
// header.
func dnsLoad(ctx context.Context, addr string, q dnsQueries, senders int, d time.Duration) ProxyDNSRun {
	run := ProxyDNSRun{Kind: q.kind, Senders: senders}
	var mu sync.Mutex // guards run's counters and lat while the senders merge their results
	var lat []time.Duration
	cpu0, t0 := processCPU(), time.Now()
	deadline := t0.Add(d)
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			l, n, errs, first := dnsSender(ctx, addr, q, s*len(q.packed)/senders, deadline)
			mu.Lock()
			defer mu.Unlock()
			lat = append(lat, l...)
			run.Queries += n
			if run.Errors += errs; run.FirstErr == "" {
				run.FirstErr = first
			}
		})
	}
	wg.Wait()
	wall := time.Since(t0)
	run.QPS = float64(len(lat)) / wall.Seconds()
	run.CPU = (processCPU() - cpu0).Seconds() / wall.Seconds()
	run.P50, run.P99 = medianDuration(lat), percentile(lat, 99)
	return run
}

// dnsSender is one sender's loop: its latencies of good answers, queries sent, errors and the first.
func dnsSender(ctx context.Context, addr string, q dnsQueries, offset int, deadline time.Time) ([]time.Duration, int, int, string) {
	co, err := dns.Dial("udp", addr)
	if err != nil {
		return nil, 0, 1, err.Error()
	}
	defer co.Close()
	var lat []time.Duration
	sent, errs, first := 0, 0, ""
	note := func(err error) {
		if errs++; first == "" {
			first = err.Error()
		}
	}
	msg, buf := make([]byte, 512), make([]byte, 64<<10)
	for i := offset; ctx.Err() == nil; i++ {
		t0 := time.Now()
		if t0.After(deadline) {
			break
		}
		p := q.packed[i%len(q.packed)]
		msg = append(msg[:0], p...)
		id := uint16(i)
		binary.BigEndian.PutUint16(msg, id)
		sent++
		if _, err := co.Conn.Write(msg); err != nil {
			note(err)
			continue
		}
		if err := readAnswer(co, buf, id, q, t0.Add(2*time.Second)); err != nil {
			note(err)
			continue
		}
		lat = append(lat, time.Since(t0))
	}
	return lat, sent, errs, first
}

// readAnswer reads datagrams until the answer to id (a late answer to an earlier query is skipped) and checks
// its header.
func readAnswer(co *dns.Conn, buf []byte, id uint16, q dnsQueries, deadline time.Time) error {
	_ = co.SetReadDeadline(deadline)
	for {
		n, err := co.Conn.Read(buf)
		if err != nil {
			return err
		}
		if n < 12 || binary.BigEndian.Uint16(buf) != id {
			continue
		}
		rcode, answers := int(buf[3]&0x0f), int(binary.BigEndian.Uint16(buf[6:]))
		if rcode != q.rcode || answers != q.answers {
			return fmt.Errorf("%s: rcode %s with %d answers, want %s with %d", q.kind, dns.RcodeToString[rcode], answers,
				dns.RcodeToString[q.rcode], q.answers)
		}
		return nil
	}
}

// processCPU is the CPU time (user and system) this process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
