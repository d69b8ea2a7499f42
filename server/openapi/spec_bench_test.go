package openapi

import (
	"testing"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
)

// BenchmarkBuild builds the documents of the registry the server serves (JSON forms; protobuf is built on first
// request).
func BenchmarkBuild(b *testing.B) {
	reg := resources.Default()
	for b.Loop() {
		if _, err := Build(reg, "v1.37.2"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProtobuf converts the v2 document to gnostic protobuf, which the first kubectl request pays for.
func BenchmarkProtobuf(b *testing.B) {
	s, err := Build(resources.Default(), "v1.37.2")
	if err != nil {
		b.Fatal(err)
	}
	data := s.v2.json.body
	for b.Loop() {
		if _, err := v2Proto(data); err != nil {
			b.Fatal(err)
		}
	}
}
