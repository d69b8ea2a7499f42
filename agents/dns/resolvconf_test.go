package dns

import (
	"fmt"
	"strings"
	"testing"
)

func TestResolvConf(t *testing.T) {
	var many []string
	for i := range 40 {
		many = append(many, fmt.Sprintf("d%d.example.com", i))
	}
	long := strings.Repeat("a", 60) + "." + strings.Repeat("b", 60) + "." + strings.Repeat("c", 60) + "." + strings.Repeat("d", 60) + ".example.com"
	var wide []string // 30 domains of 100 characters: 3029 characters on the line
	for i := range 30 {
		wide = append(wide, fmt.Sprintf("%03d%s.example.com", i, strings.Repeat("x", 85)))
	}
	tests := []struct {
		name       string
		domain     string
		hostSearch []string
		options    []string
		want       string
	}{
		{"cluster domain only", "", nil, nil, "nameserver 10.244.0.1\n" +
			"search apps.svc.cluster.local svc.cluster.local cluster.local\n" +
			"options ndots:5\n"},
		{"host search domains appended, duplicates and root dropped", "cluster.local", []string{"corp.example.", "cluster.local", ".", "lab.example"}, nil,
			"nameserver 10.244.0.1\n" +
				"search apps.svc.cluster.local svc.cluster.local cluster.local corp.example lab.example\n" +
				"options ndots:5\n"},
		{"another cluster domain", "k8s.example.", nil, nil, "nameserver 10.244.0.1\n" +
			"search apps.svc.k8s.example svc.k8s.example k8s.example\n" +
			"options ndots:5\n"},
		{"options merged over ndots:5", "", nil, []string{"timeout:2", "ndots:2", "edns0"}, "nameserver 10.244.0.1\n" +
			"search apps.svc.cluster.local svc.cluster.local cluster.local\n" +
			"options ndots:2 timeout:2 edns0\n"},
		{"at most 32 search domains", "", many, nil, "nameserver 10.244.0.1\n" +
			"search apps.svc.cluster.local svc.cluster.local cluster.local " + strings.Join(many[:29], " ") + "\n" +
			"options ndots:5\n"},
		{"a domain over 253 characters dropped", "", []string{long, "lab.example"}, nil, "nameserver 10.244.0.1\n" +
			"search apps.svc.cluster.local svc.cluster.local cluster.local lab.example\n" +
			"options ndots:5\n"},
		{"the line cut at 2048 characters", "", wide, nil, "nameserver 10.244.0.1\n" +
			"search apps.svc.cluster.local svc.cluster.local cluster.local " + strings.Join(wide[:19], " ") + "\n" +
			"options ndots:5\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ResolvConf(tt.domain, "apps", "10.244.0.1", tt.hostSearch, tt.options...)
			equal(t, "resolv.conf", got, tt.want)
			if search := strings.Fields(strings.Split(got, "\n")[1]); len(strings.Join(search[1:], " ")) > 2048 || len(search)-1 > 32 {
				t.Errorf("search line over the limits: %d domains, %d characters", len(search)-1, len(strings.Join(search[1:], " ")))
			}
		})
	}
}
