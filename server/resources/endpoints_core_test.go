package resources

//lint:file-ignore SA1019 core/v1 Endpoints is deprecated but still served, and tested.

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestValidateEndpoints(t *testing.T) {
	runCoreValidation(t, "endpoints", []coreCase{
		{"valid", &corev1.Endpoints{Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.1.0.5"}},
			Ports: []corev1.EndpointPort{{Name: "http", Port: 80}, {Name: "https", Port: 443}}}}}, []string{}},
		{"invalid", &corev1.Endpoints{Subsets: []corev1.EndpointSubset{{}, {Addresses: []corev1.EndpointAddress{{IP: "127.0.0.1"}},
			Ports: []corev1.EndpointPort{{Port: 80}, {Name: "b", Port: 0}, {Name: "c", Port: 8, Protocol: "ICMP"}}}}},
			[]string{required + "subsets[0]", invalid + "subsets[1].addresses[0].ip", required + "subsets[1].ports[0].name",
				invalid + "subsets[1].ports[1].port", notSupported + "subsets[1].ports[2].protocol"}},
		{"special addresses", &corev1.Endpoints{Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{
			{IP: "0.0.0.0"}, {IP: "169.254.1.1"}, {IP: "224.0.0.1"}, {IP: "not-an-ip"}}}}},
			[]string{invalid + "subsets[0].addresses[0].ip", invalid + "subsets[0].addresses[1].ip",
				invalid + "subsets[0].addresses[2].ip", invalid + "subsets[0].addresses[3].ip"}},
	})
}

func TestEndpointsCells(t *testing.T) {
	meta := tablePod(func(*corev1.Pod) {}).ObjectMeta
	tests := []struct {
		name string
		ep   *corev1.Endpoints
		want []any
	}{
		{"many", &corev1.Endpoints{ObjectMeta: meta, Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "10.1.0.1"}, {IP: "10.1.0.2"}, {IP: "fd00::3"}},
			Ports:     []corev1.EndpointPort{{Port: 80}, {Port: 443}}}}},
			[]any{"web", "10.1.0.1:80,10.1.0.2:80,[fd00::3]:80 + 3 more...", "2m"}},
		{"headless without ports", &corev1.Endpoints{ObjectMeta: meta, Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "10.1.0.1"}}}}}, []any{"web", "10.1.0.1", "2m"}},
		{"none", &corev1.Endpoints{ObjectMeta: meta}, []any{"web", "<none>", "2m"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, coreResource(t, "endpoints").Table.Cells(tt.ep, tableNow)); diff != "" {
				t.Errorf("cells (-want +got):\n%s", diff)
			}
		})
	}
}
