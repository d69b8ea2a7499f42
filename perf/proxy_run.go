package perf

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// proxyRunner holds one proxyperf run's state.
type proxyRunner struct {
	cfg  ProxyConfig
	log  *slog.Logger
	repo string
	res  *ProxyResults
}

// ErrProxyNeedsRoot is returned, before anything runs, when a selected scenario needs root.
var ErrProxyNeedsRoot = errors.New("proxyperf: the sync, change and connect scenarios need root " +
	"(they make network namespaces and program nftables): run as root, or select --scenarios dns,ipvs")

// ErrProxyFailed is returned, after the report is written, when a scenario ended with an error.
var ErrProxyFailed = errors.New("proxyperf: a scenario failed (see the report)")

// RunProxy measures the Service proxy and the cluster DNS server: the nftables backend's full sync and one
// endpoint change, the IPVS backend's in the VM, connection setup through a cluster IP against the pod IP,
// and DNS queries/s. Everything runs in the harness process, in network namespaces it makes and releases (they
// go with it whatever happens). A scenario that fails is reported with its error and the others still run;
// the run then returns ErrProxyFailed after writing the report.
func RunProxy(ctx context.Context, cfg ProxyConfig) (*ProxyResults, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.needsRoot() && os.Geteuid() != 0 {
		return nil, ErrProxyNeedsRoot
	}
	r := &proxyRunner{cfg: cfg, log: cfg.Logger, repo: repoRoot(),
		res: &ProxyResults{Started: time.Now(), Quick: cfg.Quick, Command: cfg.Command, LoadAvg: loadAvg(),
			Shape: ProxyShape{Scenarios: cfg.Scenarios, SyncSizes: cfg.SyncSizes, SyncReps: cfg.SyncReps,
				Endpoints: cfg.Endpoints, ChangeServices: cfg.ChangeServices, ChangeReps: cfg.ChangeReps,
				ConnectSamples: cfg.ConnectSamples, ConnectOthers: cfg.ConnectOthers, DNSServices: cfg.DNSServices,
				DNSHeadless: cfg.DNSHeadless, DNSSenders: cfg.DNSSenders, DNSDuration: cfg.DNSDuration, Seed: cfg.Seed}}}
	r.res.Machine = readMachine(r.repo, os.TempDir())
	r.run(ctx)
	r.res.Finished = time.Now()
	if err := ctx.Err(); err != nil {
		r.res.Errors = append(r.res.Errors, err.Error())
	}
	if err := r.write(); err != nil {
		return r.res, err
	}
	if r.failed() {
		return r.res, ErrProxyFailed
	}
	return r.res, ctx.Err()
}

// run runs the selected scenarios, the IPVS one last (it boots a VM).
func (r *proxyRunner) run(ctx context.Context) {
	for _, mode := range []string{modeNFT, modeNFTOne} {
		if r.cfg.runs(scSync) {
			for _, n := range r.cfg.SyncSizes {
				if ctx.Err() == nil {
					r.res.Sync = append(r.res.Sync, r.fullSync(ctx, n, mode))
				}
			}
		}
		if r.cfg.runs(scChange) && ctx.Err() == nil {
			r.res.Change = append(r.res.Change, r.change(ctx, mode))
		}
	}
	if r.cfg.runs(scConnect) && ctx.Err() == nil {
		r.res.Connect = r.connect(ctx)
	}
	if r.cfg.runs(scDNS) && ctx.Err() == nil {
		r.res.DNS = r.dnsScenario(ctx)
	}
	switch {
	case r.cfg.runs(scIPVS) && ctx.Err() == nil:
		r.res.IPVS = r.ipvs(ctx)
	case !r.cfg.runs(scIPVS) && r.cfg.Quick:
		r.res.IPVS = &ProxyIPVSResult{NotMeasured: "not run by --quick (its VM takes minutes; add --scenarios ...,ipvs)"}
	}
}

func (r *proxyRunner) failed() bool {
	res := r.res
	var errs []string
	for _, s := range res.Sync {
		errs = append(errs, s.Err)
	}
	for _, c := range res.Change {
		errs = append(errs, c.Err)
	}
	for _, c := range res.Connect {
		errs = append(errs, c.Err)
	}
	if res.DNS != nil {
		errs = append(errs, res.DNS.Err)
	}
	if res.IPVS != nil {
		errs = append(errs, res.IPVS.Err)
	}
	return strings.Join(errs, "") != ""
}

// write saves the raw results and the report's block.
func (r *proxyRunner) write() error {
	if r.cfg.JSONOut != "" {
		b, err := json.MarshalIndent(r.res, "", "  ")
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(r.cfg.JSONOut), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(r.cfg.JSONOut, b, 0o644); err != nil {
			return err
		}
	}
	if r.cfg.Out == "" {
		return nil
	}
	if err := WriteProxyReport(r.cfg.Out, ProxyReport(r.res)); err != nil {
		return err
	}
	r.log.Info("wrote report block", "path", r.cfg.Out)
	return nil
}
