package kubeapi

import (
	"mime"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
)

// codecs serializes every scheme type as JSON, YAML and protobuf.
var codecs = serializer.NewCodecFactory(resources.Scheme, serializer.EnableStrict)

// output is a negotiated response format: the serializer, and the "as" transformation the client asked for.
type output struct {
	info runtime.SerializerInfo
	// as is "" for the object itself, or Table, PartialObjectMetadata, PartialObjectMetadataList,
	// APIGroupDiscoveryList (with their groups: meta.k8s.io, apidiscovery.k8s.io).
	as string
	// pretty asks for indented JSON.
	pretty bool
}

// negotiate picks the first entry of the Accept header the server can produce. Transformations ("as=") are
// accepted only if allowed lists them; an entry asking for another is skipped, as upstream does. ok is false
// when nothing acceptable remains (406).
func negotiate(accept string, allowed ...string) (output, bool) {
	if strings.TrimSpace(accept) == "" {
		accept = "*/*"
	}
	for _, clause := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(clause))
		if err != nil {
			continue
		}
		if params["stream"] != "" && params["stream"] != "watch" {
			continue
		}
		as := params["as"]
		if as != "" && !asAllowed(as, params, allowed) {
			continue
		}
		info, ok := serializerFor(mt)
		if !ok {
			continue
		}
		return output{info: info, as: as, pretty: params["pretty"] == "1" || params["pretty"] == "true"}, true
	}
	return output{}, false
}

func asAllowed(as string, params map[string]string, allowed []string) bool {
	for _, a := range allowed {
		if a != as {
			continue
		}
		switch as {
		case "APIGroupDiscoveryList":
			return params["g"] == "apidiscovery.k8s.io" && params["v"] == "v2"
		default:
			return params["g"] == "meta.k8s.io" && (params["v"] == "v1" || params["v"] == "v1beta1")
		}
	}
	return false
}

// serializerFor maps a media type, wildcards included, to a serializer; JSON is the default.
func serializerFor(mediaType string) (runtime.SerializerInfo, bool) {
	switch mediaType {
	case "*/*", "application/*", "application/json":
		mediaType = runtime.ContentTypeJSON
	case "application/yaml", "text/yaml":
		mediaType = runtime.ContentTypeYAML
	}
	for _, info := range codecs.SupportedMediaTypes() {
		if info.MediaType == mediaType {
			return info, true
		}
	}
	return runtime.SerializerInfo{}, false
}

// contentTypeOf returns the media type of a response produced with out.
func (out output) contentType() string {
	ct := out.info.MediaType
	if out.as != "" {
		g := "meta.k8s.io"
		v := "v1"
		if out.as == "APIGroupDiscoveryList" {
			g, v = "apidiscovery.k8s.io", "v2"
		}
		ct += ";g=" + g + ";v=" + v + ";as=" + out.as
	}
	return ct
}

// encoder returns the serializer for one response, pretty when asked and available.
func (out output) encoder() runtime.Encoder {
	if out.pretty && out.info.PrettySerializer != nil {
		return out.info.PrettySerializer
	}
	return out.info.Serializer
}
