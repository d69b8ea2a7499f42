package network

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// CNIConfigName is the file WriteCNIConfig writes in a CNI configuration directory: "10-" sorts it before the
// configurations other software may leave there (containerd uses the first, max_conf_num = 1).
const CNIConfigName = "10-wheelhouse.conflist"

// CNINetworkName is the network's name in its CNI configuration.
const CNINetworkName = "wheelhouse"

// CNIConfig is the CNI network configuration list with which a CRI runtime (containerd) puts pods on this node's
// pod network, the same network the process runtime builds itself: the `bridge` plugin on the node's bridge
// (the gateway address on it, hairpin mode so that a pod reaches itself through its Service, no masquerade: the
// network's nftables table does it), `host-local` addresses from the node's pod CIDR kept under ipamDir, a
// default route through the gateway; then `portmap` for hostPort.
func (n *Network) CNIConfig(ipamDir string) ([]byte, error) {
	type (
		rangeSpec struct {
			Subnet  string `json:"subnet"`
			Gateway string `json:"gateway"`
		}
		route struct {
			Dst string `json:"dst"`
		}
		ipam struct {
			Type    string        `json:"type"`
			Ranges  [][]rangeSpec `json:"ranges"`
			Routes  []route       `json:"routes"`
			DataDir string        `json:"dataDir"`
		}
	)
	cfg := n.cfg
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       CNINetworkName,
		"plugins": []any{
			map[string]any{"type": "bridge", "bridge": cfg.Bridge, "isGateway": true, "ipMasq": false,
				"hairpinMode": true, "mtu": cfg.MTU,
				"ipam": ipam{Type: "host-local", DataDir: ipamDir,
					Ranges: [][]rangeSpec{{{Subnet: cfg.PodCIDR.Masked().String(), Gateway: n.gw.String()}}},
					Routes: []route{{Dst: "0.0.0.0/0"}}}},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// WriteCNIConfig writes CNIConfig into dir as CNIConfigName (atomically: a runtime watching dir never reads half
// a file), keeping host-local's allocations in ipamDir.
func (n *Network) WriteCNIConfig(dir, ipamDir string) error {
	data, err := n.CNIConfig(ipamDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("network: CNI configuration directory: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(dir, CNIConfigName), data); err != nil {
		return fmt.Errorf("network: write the CNI configuration: %w", err)
	}
	return nil
}
