package web

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
)

// Logs are the pods/log subresource read as the user (kubectl logs): the page streams them with follow, the
// download answers them once as a file.

type logsView struct {
	Shell      shell
	Ref        objectRef
	Containers []string
	Container  string
	Previous   bool
	Tail       int64
	Stream     string
	Download   string
}

func (d *Dashboard) logsPage(c echo.Context) error {
	s, ok, err := d.clusterPage(c)
	if !ok {
		return err
	}
	ctx := c.Request().Context()
	ref := objectRef{Cluster: s.cluster.ID, Key: "pods", Namespace: c.Param("namespace"), Name: c.Param("name")}
	if !validNamespace(ref.Namespace) || ref.Namespace == "" {
		return d.notFound(c, "That is not a namespace name.")
	}
	res := d.byKey["pods"]
	if err := d.allow(ctx, s, "get", res, ref.Namespace, ref.Name); err != nil {
		return d.errorPage(c, http.StatusForbidden, "Forbidden", regionReason(err))
	}
	pod, ok := d.cachedObject(ctx, s, res, ref).(*corev1.Pod)
	if !ok {
		return d.notFound(c, "Pod "+ref.Name+" does not exist (any more).")
	}
	v := logsView{Shell: d.shell(s, "Logs of "+ref.Name, "pods"), Ref: ref, Container: c.QueryParam("container"),
		Previous: c.QueryParam("previous") == "1", Tail: 1000}
	for _, ct := range pod.Spec.InitContainers {
		v.Containers = append(v.Containers, ct.Name)
	}
	for _, ct := range pod.Spec.Containers {
		v.Containers = append(v.Containers, ct.Name)
	}
	if v.Container == "" && len(pod.Spec.Containers) > 0 {
		v.Container = pod.Spec.Containers[0].Name
	}
	if n, err := strconv.ParseInt(c.QueryParam("tail"), 10, 64); err == nil && n >= 0 {
		v.Tail = n
	}
	q := url.Values{"container": {v.Container}, "tail": {strconv.FormatInt(v.Tail, 10)}}
	if v.Previous {
		q.Set("previous", "1")
	}
	base := logsHref(ref)
	v.Stream = base + "/stream?" + q.Encode()
	v.Download = base + "/download?" + q.Encode()
	return d.render(c, http.StatusOK, logsPage(v))
}

// logStream opens the pod's log as the user.
func (d *Dashboard) logStream(c echo.Context, follow bool) (io.ReadCloser, error) {
	s, err := d.clusterScope(c.Request().Context(), viewerOf(c), c.Param("cluster"))
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(d.userConfig(s))
	if err != nil {
		return nil, err
	}
	opts := &corev1.PodLogOptions{Container: c.QueryParam("container"), Follow: follow, Previous: c.QueryParam("previous") == "1"}
	if n, err := strconv.ParseInt(c.QueryParam("tail"), 10, 64); err == nil && n >= 0 {
		opts.TailLines = &n
	}
	return cs.CoreV1().Pods(c.Param("namespace")).GetLogs(c.Param("name"), opts).Stream(c.Request().Context())
}

func (d *Dashboard) logsStream(c echo.Context) error {
	rc, err := d.logStream(c, true)
	if err != nil {
		return d.logError(c, err)
	}
	defer rc.Close()
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "text/plain; charset=utf-8")
	h.Set("X-Accel-Buffering", "no")
	c.Response().WriteHeader(http.StatusOK)
	c.Response().Flush()
	buf := make([]byte, 32<<10)
	for {
		n, err := rc.Read(buf)
		if n > 0 {
			if _, werr := c.Response().Write(buf[:n]); werr != nil {
				return nil
			}
			c.Response().Flush()
		}
		if err != nil {
			return nil
		}
	}
}

func (d *Dashboard) logsDownload(c echo.Context) error {
	rc, err := d.logStream(c, false)
	if err != nil {
		return d.logError(c, err)
	}
	defer rc.Close()
	name := c.Param("name") + "-" + c.QueryParam("container") + ".log"
	c.Response().Header().Set(echo.HeaderContentDisposition, `attachment; filename="`+sanitizeFilename(name)+`"`)
	c.Response().Header().Set(echo.HeaderContentType, "text/plain; charset=utf-8")
	c.Response().WriteHeader(http.StatusOK)
	_, _ = io.Copy(c.Response(), rc)
	return nil
}

// logError answers a log request that failed, as plain text the page shows.
func (d *Dashboard) logError(c echo.Context, err error) error {
	if errors.Is(err, errNoAccess) {
		return c.String(http.StatusNotFound, "There is no such cluster here.")
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	code := apiCode(err)
	if code >= 500 {
		d.log.Error("reading pod logs failed", "err", err)
	}
	return c.String(code, apiMessage(err))
}

func sanitizeFilename(s string) string {
	b := []byte(s)
	for i, ch := range b {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '.' || ch == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}
