package kubelet

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	criclient "github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri/fakecri"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi/apitest"
)

// criEnv runs node n1's pod manager on a runtime that runs images: the CRI client (cri.Open) talking to fakecri,
// which serves the recording fake runtime (e.rt) and an in-memory image store. Events go to the API.
type criEnv struct {
	*podEnv
	srv *fakecri.Server
}

func newCRIEnv(t *testing.T, configure func(ce *criEnv, c *PodsConfig)) *criEnv {
	ce := &criEnv{}
	ce.podEnv = newPodEnvConfigured(t, func(e *podEnv, c *PodsConfig) {
		if ce.srv == nil {
			ce.srv = fakecri.Start(t, e.rt)
		}
		r := openCRI(t, ce.srv)
		c.Runtime, c.Images = r, r
		c.Recorder = apiRecorder(t, e.node)
		c.ImageGC.Period = 24 * time.Hour // collections are the test's to run
		if configure != nil {
			configure(ce, c)
		}
	})
	return ce
}

func openCRI(t *testing.T, s *fakecri.Server) *criclient.Runtime {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	r, err := criclient.Open(ctx, criclient.Config{Endpoint: s.Endpoint(), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// apiRecorder records events into the API with cs, as the agent does, without aggregating or dropping any.
func apiRecorder(t *testing.T, cs kubernetes.Interface) record.EventRecorder {
	b := record.NewBroadcaster(record.WithContext(t.Context()), record.WithCorrelatorOptions(record.CorrelatorOptions{
		BurstSize: 1000, QPS: 1000, MaxEvents: 1000}))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	t.Cleanup(b.Shutdown)
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: "n1"})
}

// events are the API's events about the object called name (in namespace default: pods, and Nodes' events), as
// "Type Reason Message" with their counts.
func (e *podEnv) events(name string) map[string]int32 {
	list, err := e.admin.CoreV1().Events("default").List(e.t.Context(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String()})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]int32{}
	for _, ev := range list.Items {
		out[ev.Type+" "+ev.Reason+" "+ev.Message] += max(ev.Count, 1)
	}
	return out
}

// eventually waits until the object called name has an event (with at least count occurrences).
func (e *podEnv) eventually(name, event string, count int32) {
	e.t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for {
		last := e.events(name)
		if last[event] >= count {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			e.t.Fatalf("no event %q ×%d on %s within 20s; events: %q", event, count, name, last)
		}
	}
}

// waiting is the container's waiting reason and message in the pod's status ("" if it is not waiting).
func waiting(p *corev1.Pod, container string) (reason, msg string) {
	for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		if cs.Name == container && cs.State.Waiting != nil {
			return cs.State.Waiting.Reason, cs.State.Waiting.Message
		}
	}
	return "", ""
}

func isRunning(p *corev1.Pod) bool {
	return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
}

// pulls are the images fakecri was asked to pull.
func (ce *criEnv) pulls(image string) []fakecri.Pull {
	var out []fakecri.Pull
	for _, p := range ce.srv.Pulls() {
		if p.Image == image {
			out = append(out, p)
		}
	}
	return out
}

// calls counts fakecri's calls of a method.
func (ce *criEnv) calls(method string) int {
	n := 0
	for _, c := range ce.srv.Calls() {
		if c == method {
			n++
		}
	}
	return n
}

// syncs waits until the pod workers have asked fakecri for method n more times: that many syncs went by.
func (ce *criEnv) syncs(method string, n int) {
	ce.t.Helper()
	want := ce.calls(method) + n
	apitest.Eventually(ce.t, fmt.Sprintf("%d more %s calls", n, method), func() bool { return ce.calls(method) >= want })
}

func imagePod(name, image string, policy corev1.PullPolicy) *corev1.Pod {
	return simple(name, corev1.RestartPolicyAlways, corev1.Container{Name: "app", Image: image, ImagePullPolicy: policy, Command: []string{"serve"}})
}

// TestImagePullPolicies: every pull policy with the image present and absent, as the API shows it: the
// container's state and the pod's events; fakecri shows which pulls happened.
func TestImagePullPolicies(t *testing.T) {
	ce := newCRIEnv(t, nil)
	const size = 1 << 20 // fakecri's pulled images
	cases := []struct {
		name, image string
		policy      corev1.PullPolicy
		present     bool
		pulled      bool
		events      []string
	}{
		{"always-present", "example.test/always-present:1", corev1.PullAlways, true, true, []string{
			`Normal Pulling Pulling image "example.test/always-present:1"`,
			`Normal Pulled Successfully pulled image "example.test/always-present:1" in 0s (0s including waiting). Image size: 1234 bytes.`}},
		{"always-absent", "example.test/always-absent:1", corev1.PullAlways, false, true, []string{
			`Normal Pulling Pulling image "example.test/always-absent:1"`,
			fmt.Sprintf(`Normal Pulled Successfully pulled image "example.test/always-absent:1" in 0s (0s including waiting). Image size: %d bytes.`, size)}},
		{"ifnotpresent-present", "example.test/ifnp-present:1", corev1.PullIfNotPresent, true, false, []string{
			`Normal Pulled Container image "example.test/ifnp-present:1" already present on machine`}},
		{"ifnotpresent-absent", "example.test/ifnp-absent:1", corev1.PullIfNotPresent, false, true, []string{
			`Normal Pulling Pulling image "example.test/ifnp-absent:1"`,
			fmt.Sprintf(`Normal Pulled Successfully pulled image "example.test/ifnp-absent:1" in 0s (0s including waiting). Image size: %d bytes.`, size)}},
		{"never-present", "example.test/never-present:1", corev1.PullNever, true, false, []string{
			`Normal Pulled Container image "example.test/never-present:1" already present on machine`}},
		// Without a tag the runtime is asked for ":latest", as kubelet's applyDefaultImageTag.
		{"untagged-present", "example.test/untagged", corev1.PullIfNotPresent, true, false, []string{
			`Normal Pulled Container image "example.test/untagged" already present on machine`}},
	}
	for _, tc := range cases {
		if tc.present {
			ref, _ := withDefaultTag(tc.image)
			ce.srv.AddImage(ref, 1234)
		}
		ce.create(imagePod(tc.name, tc.image, tc.policy))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := ce.until("running", isRunning, tc.name)
			if got := p.Status.ContainerStatuses[0].Image; got != tc.image {
				t.Errorf("status image %q, want %q", got, tc.image)
			}
			for _, ev := range append(tc.events, "Normal Started Started container app") {
				ce.eventually(tc.name, ev, 1)
			}
			ref, _ := withDefaultTag(tc.image)
			if n := len(ce.pulls(ref)); (n > 0) != tc.pulled || n > 1 {
				t.Errorf("%d pulls of %s, want pulled=%v (once)", n, ref, tc.pulled)
			}
			if !tc.pulled {
				if evs := ce.events(tc.name); evs[fmt.Sprintf(`Normal Pulling Pulling image %q`, tc.image)] != 0 {
					t.Errorf("a Pulling event without a pull: %v", evs)
				}
			}
		})
	}

	// Never, absent: the container waits with ErrImageNeverPull (reported once, not at every sync) and starts
	// once the image is there.
	t.Run("never-absent", func(t *testing.T) {
		ce.create(imagePod("never-absent", "example.test/never-absent:1", corev1.PullNever))
		msg := `Container image "example.test/never-absent:1" is not present with pull policy of Never`
		ce.until("ErrImageNeverPull", func(p *corev1.Pod) bool {
			r, m := waiting(p, "app")
			return r == "ErrImageNeverPull" && m == msg
		}, "never-absent")
		ce.eventually("never-absent", "Warning ErrImageNeverPull "+msg, 1)
		ce.eventually("never-absent", "Warning Failed Error: ErrImageNeverPull", 1)
		ce.syncs("ImageStatus", 5)
		if evs := ce.events("never-absent"); evs["Warning ErrImageNeverPull "+msg] != 1 {
			t.Errorf("ErrImageNeverPull reported %d times over several syncs, want once", evs["Warning ErrImageNeverPull "+msg])
		}
		ce.srv.AddImage("example.test/never-absent:1", 10)
		ce.until("running once the image is there", isRunning, "never-absent")
		if n := len(ce.pulls("example.test/never-absent:1")); n != 0 {
			t.Errorf("%d pulls with policy Never", n)
		}
	})
}

// TestImagePullBackOff: a failing pull is ErrImagePull, then ImagePullBackOff for 10 s, 20 s, 40 s (the fake
// clock), one BackOff event per period; the pull is retried only when a period ends, and the container starts
// once the pull works.
func TestImagePullBackOff(t *testing.T) {
	ce := newCRIEnv(t, nil)
	const image = "example.test/broken:1"
	const cause = `failed to pull and unpack image "example.test/broken:1": not found`
	ce.srv.FailPull(image, status.Error(codes.NotFound, cause))
	reasons := ce.watchReasons("broken")
	ce.create(imagePod("broken", image, corev1.PullIfNotPresent))

	pullErr := "rpc error: code = NotFound desc = " + cause
	backoffMsg := `Back-off pulling image "example.test/broken:1": ErrImagePull: ` + pullErr
	ce.until("ImagePullBackOff", func(p *corev1.Pod) bool {
		r, m := waiting(p, "app")
		return r == "ImagePullBackOff" && m == backoffMsg
	}, "broken")
	apitest.Eventually(t, "the watch shows ImagePullBackOff", func() bool {
		got := reasons()
		return len(got) > 0 && got[len(got)-1] == "ImagePullBackOff: "+backoffMsg
	})
	if got := reasons(); len(got) != 2 || got[0] != "ErrImagePull: "+pullErr {
		t.Fatalf("waiting states %q, want ErrImagePull then ImagePullBackOff", got)
	}
	for _, ev := range []string{`Normal Pulling Pulling image "example.test/broken:1"`,
		`Warning Failed Failed to pull image "example.test/broken:1": ` + pullErr, "Warning Failed Error: ErrImagePull",
		`Normal BackOff Back-off pulling image "example.test/broken:1"`, "Warning Failed Error: ImagePullBackOff"} {
		ce.eventually("broken", ev, 1)
	}

	pullsAfter := func(wait time.Duration, want int) {
		t.Helper()
		ce.clk.Step(wait)
		apitest.Eventually(t, fmt.Sprintf("%d pulls after %v more", want, wait), func() bool { return len(ce.pulls(image)) >= want })
		ce.syncs("ImageStatus", 3)
		if n := len(ce.pulls(image)); n != want {
			t.Fatalf("%d pulls, want %d", n, want)
		}
	}
	pullsAfter(0, 1)
	for i, delay := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second} {
		pullsAfter(delay-time.Second, i+1) // still backing off
		pullsAfter(time.Second, i+2)       // the period is over: pulled again, failed again
		ce.eventually("broken", `Normal BackOff Back-off pulling image "example.test/broken:1"`, int32(i+2))
	}
	// Several syncs in each period, one BackOff event each.
	if evs := ce.events("broken"); evs[`Normal BackOff Back-off pulling image "example.test/broken:1"`] != 4 {
		t.Errorf("BackOff events %d, want 4 (one per period)", evs[`Normal BackOff Back-off pulling image "example.test/broken:1"`])
	}

	// The registry has the image now: the next pull (after 80 s) works.
	ce.srv.FailPull(image, nil)
	pullsAfter(79*time.Second, 4)
	ce.clk.Step(time.Second)
	ce.until("running", isRunning, "broken")
	ce.eventually("broken", `Normal Pulled Successfully pulled image "example.test/broken:1" in 0s (0s including waiting). Image size: 1048576 bytes.`, 1)
	if n := len(ce.pulls(image)); n != 5 {
		t.Errorf("%d pulls, want 5", n)
	}
}

// watchReasons records the distinct waiting states ("reason: message") of the app container of the pod called
// name, in order, from a watch started now.
func (e *podEnv) watchReasons(name string) func() []string {
	w, err := e.admin.CoreV1().Pods("default").Watch(e.t.Context(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(w.Stop)
	var mu sync.Mutex
	var seen []string
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if r, m := waiting(p, "app"); r != "" && r != "ContainerCreating" {
				mu.Lock()
				if s := r + ": " + m; len(seen) == 0 || seen[len(seen)-1] != s {
					seen = append(seen, s)
				}
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

func dockerConfigJSON(t *testing.T, name string, auths map[string]dockerConfigEntry) *corev1.Secret {
	b, err := json.Marshal(map[string]any{"auths": auths})
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: b}}
}

// TestImagePullSecrets: pulls carry the credentials of the pod's pull secrets that match the image's registry
// (each in turn, most specific first, while they fail), anonymous pulls those that match none; a pull secret
// that does not exist is an event, and the pull goes ahead without it.
func TestImagePullSecrets(t *testing.T) {
	ce := newCRIEnv(t, nil)
	basic := func(user, pass string) string { return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass)) }
	for _, s := range []*corev1.Secret{
		dockerConfigJSON(t, "team", map[string]dockerConfigEntry{"reg.example.test/team": {Auth: basic("team-bot", "t0ken")}}),
		{ObjectMeta: metav1.ObjectMeta{Name: "legacy", Namespace: "default"}, Type: corev1.SecretTypeDockercfg,
			Data: map[string][]byte{corev1.DockerConfigKey: fmt.Appendf(nil, `{"https://reg.example.test/v1/":{"auth":%q}}`, basic("alice", "s3cret"))}},
	} {
		if _, err := ce.admin.CoreV1().Secrets("default").Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	secrets := []corev1.LocalObjectReference{{Name: "legacy"}, {Name: "gone"}, {Name: "team"}}
	withSecrets := func(name, image string) *corev1.Pod {
		p := imagePod(name, image, corev1.PullIfNotPresent)
		p.Spec.ImagePullSecrets = secrets
		return p
	}

	// A host match: alice's credentials.
	ce.create(withSecrets("host", "reg.example.test/app:1"))
	ce.until("running", isRunning, "host")
	if got := ce.pulls("reg.example.test/app:1"); len(got) != 1 || got[0].Auth.GetUsername() != "alice" || got[0].Auth.GetPassword() != "s3cret" {
		t.Errorf("pulls %+v, want one as alice", got)
	}
	ce.eventually("host", "Warning FailedToRetrieveImagePullSecret Unable to retrieve some image pull secrets (gone); attempting to pull the image may not succeed.", 1)

	// No registry matches: anonymous.
	ce.create(withSecrets("anon", "other.example.test/app:1"))
	ce.until("running", isRunning, "anon")
	if got := ce.pulls("other.example.test/app:1"); len(got) != 1 || got[0].Auth != nil {
		t.Errorf("pulls %+v, want one anonymous", got)
	}

	// The path prefix and the host both match: the team's credentials first, then alice's; when both fail the
	// container shows their errors (kubelet's aggregate: the same message once).
	const image = "reg.example.test/team/app:1"
	ce.srv.FailPull(image, status.Error(codes.Unauthenticated, "denied"))
	ce.create(withSecrets("both", image))
	want := "rpc error: code = Unauthenticated desc = denied"
	ce.until("ErrImagePull", func(p *corev1.Pod) bool {
		r, m := waiting(p, "app")
		return r == "ErrImagePull" && m == want || r == "ImagePullBackOff" && strings.HasSuffix(m, want)
	}, "both")
	if got := ce.pulls(image); len(got) != 2 || got[0].Auth.GetUsername() != "team-bot" || got[1].Auth.GetUsername() != "alice" {
		t.Errorf("pulls %+v, want team-bot's then alice's", got)
	}
}

// TestImagePullsOnProcessRuntime: with a runtime that only records images (no ImageService), the image is
// recorded once per start with the "recorded" event: no policy, no back-off, no collection.
func TestImagePullsOnProcessRuntime(t *testing.T) {
	e := newPodEnvConfigured(t, func(e *podEnv, c *PodsConfig) { c.Recorder = apiRecorder(t, e.node) })
	e.create(imagePod("p", "example.test/app:1", corev1.PullNever))
	e.until("running", isRunning, "p")
	e.eventually("p", `Normal Pulled Container image "example.test/app:1" recorded: the process runtime runs the container's command on the node and pulls no image`, 1)
	if e.pods.images != nil {
		t.Error("an image manager for a runtime without an image service")
	}
	if imgs := e.rt.Images(); len(imgs) != 1 || imgs[0] != "example.test/app:1" {
		t.Errorf("recorded images %v", imgs)
	}
}

// TestPullPolicyDefaults: an empty imagePullPolicy is defaulted as the API server does.
func TestPullPolicyDefaults(t *testing.T) {
	for image, want := range map[string]corev1.PullPolicy{
		"nginx": corev1.PullAlways, "nginx:latest": corev1.PullAlways, "reg.example.test:5000/app": corev1.PullAlways,
		"nginx:1.27": corev1.PullIfNotPresent, "reg.example.test:5000/app:v1": corev1.PullIfNotPresent,
		"nginx@sha256:" + strings.Repeat("ab", 32):        corev1.PullIfNotPresent,
		"nginx:latest@sha256:" + strings.Repeat("ab", 32): corev1.PullAlways,
		"Bad Name": corev1.PullIfNotPresent,
	} {
		if got := pullPolicy(&corev1.Container{Image: image}); got != want {
			t.Errorf("%s: %s, want %s", image, got, want)
		}
	}
	if got := pullPolicy(&corev1.Container{Image: "nginx", ImagePullPolicy: corev1.PullNever}); got != corev1.PullNever {
		t.Errorf("a set policy changed to %s", got)
	}
}

// TestInvalidImageName: an image name that does not parse is InvalidImageName, reported once.
func TestInvalidImageName(t *testing.T) {
	ce := newCRIEnv(t, nil)
	ce.create(imagePod("bad", "example.test/App:1", corev1.PullIfNotPresent))
	p := ce.until("InvalidImageName", func(p *corev1.Pod) bool { r, _ := waiting(p, "app"); return r == "InvalidImageName" }, "bad")
	if _, m := waiting(p, "app"); !strings.HasPrefix(m, `Failed to apply default image tag "example.test/App:1": `) {
		t.Errorf("message %q", m)
	}
	ce.eventually("bad", "Warning Failed Error: InvalidImageName", 1)
	ce.syncs("ListPodSandbox", 10)
	if evs := ce.events("bad"); evs["Warning Failed Error: InvalidImageName"] != 1 {
		t.Errorf("InvalidImageName reported %d times, want once", evs["Warning Failed Error: InvalidImageName"])
	}
	if len(ce.srv.Pulls()) != 0 {
		t.Errorf("pulls %+v", ce.srv.Pulls())
	}
}
