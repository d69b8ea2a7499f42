package agents

import (
	"log/slog"

	"github.com/vishvananda/netns"

	"github.com/wheelhouse-dev/wheelhouse/agents/proxy"
	"github.com/wheelhouse-dev/wheelhouse/agents/proxy/ipvs"
)

// ipvsSchedulers are the kernel's IPVS schedulers (ipvsadm's names).
var ipvsSchedulers = ipvs.Schedulers

// ipvsAvailable is nil when the kernel of the agent's namespace has IPVS (loading its module if need be).
func ipvsAvailable() error { return ipvs.Available(netns.None()) }

// newIPVSBackend opens the IPVS backend of this node.
func newIPVSBackend(cfg proxyConfig, log *slog.Logger) (proxy.Backend, error) {
	return ipvs.New(ipvs.Config{Scheduler: cfg.scheduler, PodCIDR: cfg.clusterCIDR, Logger: log})
}
