package kubeapi

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"net/http"
	"strconv"

	"k8s.io/apimachinery/pkg/runtime"
)

// write encodes obj with the negotiated serializer. obj must carry its TypeMeta (kind, apiVersion).
func (rq *request) write(code int, obj runtime.Object) {
	var buf bytes.Buffer
	if err := rq.out.encoder().Encode(obj, &buf); err != nil {
		rq.api.log.ErrorContext(rq.ctx, "encoding a response failed", "err", err, "path", rq.r.URL.Path)
		code = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",` +
			`"message":"Internal error occurred: the response could not be encoded","reason":"InternalError","code":500}`)
		rq.w.Header().Set("Content-Type", "application/json")
	} else {
		rq.w.Header().Set("Content-Type", rq.out.contentType())
	}
	rq.w.WriteHeader(code)
	if rq.r.Method != http.MethodHead {
		_, _ = rq.w.Write(buf.Bytes())
	}
}

func jsonMarshal(v any) ([]byte, error) { return stdjson.Marshal(v) }

func jsonUnmarshal(b []byte, v any) error { return stdjson.Unmarshal(b, v) }

func asMaxBytes(err error, target **http.MaxBytesError) bool { return errors.As(err, target) }

func formatBytes(n int64) string { return strconv.FormatInt(n, 10) + " bytes" }
