package kubelet

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
)

// imageManager makes a container's image present before the container is created, on a runtime that runs
// images (a runtime.ImageService: containerd over CRI), as kubelet's image manager (pkg/kubelet/images) does:
//
//   - the pull policy (imagePullPolicy, defaulted as the API server does when empty): Never uses the image if
//     present, IfNotPresent pulls it if absent, Always pulls it at every container start;
//   - pulls use the pod's imagePullSecrets (kubernetes.io/dockerconfigjson and dockercfg), each credential whose
//     registry matches the image in turn until one succeeds, anonymously when none matches;
//   - a failed pull backs off per pod and image, 10 s doubling to 5 min (ErrImagePull, then ImagePullBackOff);
//     the pod worker's periodic sync retries once the period has passed;
//   - events on the pod: Pulling, Pulled, Failed, BackOff, ErrImageNeverPull, FailedToRetrieveImagePullSecret.
//
// A state that lasts (a back-off period, an image that is absent with policy Never) is reported by events once,
// not at every sync. Pulls take a slot (ImagePullLimits: one at a time by default, as kubelet's
// serializeImagePulls); the Pulled event says how long the pull took and how long with the wait for a slot.
type imageManager struct {
	svc      runtime.ImageService
	objs     objects
	clock    clock.Clock
	recorder record.EventRecorder
	log      *slog.Logger
	gc       *imageGC
	// slots holds a token per pull in progress; nil: no limit.
	slots chan struct{}
	// nodeCredentials are the node's own credentials for a registry host (nil: none).
	nodeCredentials func(host string) []*runtimeapi.AuthConfig
}

// ImagePullLimits are kubelet's serializeImagePulls and maxParallelImagePulls.
type ImagePullLimits struct {
	// Parallel lets pulls run at once (kubelet's serializeImagePulls=false); false pulls one image at a time.
	Parallel bool
	// MaxParallel bounds the pulls at once when Parallel (0: no bound). Kubelet refuses a bound above 1 with
	// serialized pulls; so does this.
	MaxParallel int
}

// Validate reports limits kubelet would refuse.
func (l ImagePullLimits) Validate() error {
	_, err := l.slots()
	return err
}

// slots is the pull semaphore of l (nil: no limit).
func (l ImagePullLimits) slots() (chan struct{}, error) {
	switch {
	case l.MaxParallel < 0:
		return nil, fmt.Errorf("kubelet: maxParallelImagePulls %d is negative", l.MaxParallel)
	case !l.Parallel && l.MaxParallel > 1:
		return nil, fmt.Errorf("kubelet: maxParallelImagePulls %d needs parallel image pulls (serializeImagePulls false)", l.MaxParallel)
	case !l.Parallel:
		return make(chan struct{}, 1), nil
	case l.MaxParallel > 0:
		return make(chan struct{}, l.MaxParallel), nil
	}
	return nil, nil
}

// imagePull is what a pod worker keeps between syncs about one image of its pod (kubelet keys both by pod and
// image): the pulls' back-off, the last pull's error (the back-off's message carries it) and the failure last
// reported by events.
type imagePull struct {
	backoff
	lastErr  string
	reported string // the waiting reason and message last reported
	// beforePull runs before each pull (nil: nothing): the worker gives up its place in the start gate.
	beforePull func()
}

// ensure makes c's image present as its pull policy says and returns the image's reference (the runtime's ID
// for it). When it cannot, reason and msg are the container's waiting state: InvalidImageName,
// ImageInspectError, ErrImageNeverPull, ErrImagePull or ImagePullBackOff. st is the pod's state for c.Image.
func (m *imageManager) ensure(ctx context.Context, pod *corev1.Pod, c *corev1.Container, sbConfig *runtimeapi.PodSandboxConfig, st *imagePull) (ref, reason, msg string) {
	image, err := withDefaultTag(c.Image)
	if err != nil {
		return m.fail(pod, st, "InspectFailed", "InvalidImageName", fmt.Sprintf("Failed to apply default image tag %q: %v", c.Image, err))
	}
	policy := pullPolicy(c)
	if policy != corev1.PullAlways {
		status, err := m.svc.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: image}, false)
		if err != nil {
			return m.fail(pod, st, "InspectFailed", "ImageInspectError", fmt.Sprintf("Failed to inspect image %q: %v", c.Image, err))
		}
		if id := status.GetImage().GetId(); id != "" {
			m.recorder.Eventf(pod, corev1.EventTypeNormal, "Pulled", "Container image %q already present on machine", c.Image)
			return id, "", ""
		}
		if policy == corev1.PullNever {
			return m.fail(pod, st, "ErrImageNeverPull", "ErrImageNeverPull", fmt.Sprintf("Container image %q is not present with pull policy of Never", c.Image))
		}
	}
	if st.active(m.clock.Now()) {
		msg := fmt.Sprintf("Back-off pulling image %q", c.Image)
		if st.report() {
			m.recorder.Event(pod, corev1.EventTypeNormal, "BackOff", msg)
			m.recorder.Event(pod, corev1.EventTypeWarning, "Failed", "Error: ImagePullBackOff")
		}
		if st.lastErr != "" {
			msg += ": " + st.lastErr // as kubelet's since 1.31: the waiting message says what failed
		}
		return "", "ImagePullBackOff", msg
	}
	return m.pull(ctx, pod, c.Image, image, sbConfig, st)
}

// pull pulls image (c.Image with its default tag) and records the outcome.
func (m *imageManager) pull(ctx context.Context, pod *corev1.Pod, requested, image string, sbConfig *runtimeapi.PodSandboxConfig, st *imagePull) (ref, reason, msg string) {
	if st.beforePull != nil {
		st.beforePull()
	}
	m.recorder.Eventf(pod, corev1.EventTypeNormal, "Pulling", "Pulling image %q", requested)
	queued := m.clock.Now()
	if m.slots != nil {
		select {
		case m.slots <- struct{}{}:
			defer func() { <-m.slots }()
		case <-ctx.Done():
			return "", "ErrImagePull", fmt.Sprintf("waiting to pull image %q: %v", requested, ctx.Err())
		}
	}
	start := m.clock.Now()
	ref, err := m.pullWithCredentials(ctx, pod, image, sbConfig)
	if err != nil {
		m.log.Info("pulling an image failed", "pod", pod.Namespace+"/"+pod.Name, "image", requested, "err", err)
		m.recorder.Eventf(pod, corev1.EventTypeWarning, "Failed", "Failed to pull image %q: %v", requested, err)
		m.recorder.Event(pod, corev1.EventTypeWarning, "Failed", "Error: ErrImagePull")
		st.next(m.clock.Now())
		st.lastErr, st.reported = "ErrImagePull: "+err.Error(), ""
		return "", "ErrImagePull", err.Error()
	}
	now := m.clock.Now()
	took, total := now.Sub(start).Truncate(time.Millisecond), now.Sub(queued).Truncate(time.Millisecond)
	size := ""
	if status, err := m.svc.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: ref}, false); err == nil && status.GetImage().GetSize() > 0 {
		size = fmt.Sprintf(" Image size: %d bytes.", status.Image.Size)
	}
	m.recorder.Eventf(pod, corev1.EventTypeNormal, "Pulled", "Successfully pulled image %q in %v (%v including waiting).%s", requested, took, total, size)
	return ref, "", ""
}

// fail reports a failure that lasts until something changes (the image name, the image's presence): the
// events once, the waiting state at every sync.
func (m *imageManager) fail(pod *corev1.Pod, st *imagePull, event, reason, msg string) (ref, r, message string) {
	if st.reported != reason+": "+msg {
		st.reported = reason + ": " + msg
		m.recorder.Event(pod, corev1.EventTypeWarning, event, msg)
		m.recorder.Event(pod, corev1.EventTypeWarning, "Failed", "Error: "+reason)
	}
	return "", reason, msg
}

// pullWithCredentials pulls image with each credential of the pod's pull secrets that matches it, most specific
// first, until one succeeds (the error of each if none does), or anonymously if none matches.
func (m *imageManager) pullWithCredentials(ctx context.Context, pod *corev1.Pod, image string, sbConfig *runtimeapi.PodSandboxConfig) (string, error) {
	creds, err := m.credentials(ctx, pod, image)
	if err != nil {
		return "", err
	}
	spec := &runtimeapi.ImageSpec{Image: image}
	if len(creds) == 0 {
		return m.svc.PullImage(ctx, spec, nil, sbConfig)
	}
	var errs []error
	for _, auth := range creds {
		ref, err := m.svc.PullImage(ctx, spec, auth, sbConfig)
		if err == nil {
			return ref, nil
		}
		errs = append(errs, err)
	}
	return "", utilerrors.NewAggregate(errs)
}

// credentials are the registry credentials to try for image: the pod's, then the node's (as kubelet's keyring
// puts its pull secrets before the node-level ones). Pull secrets that cannot be read are left out with a
// FailedToRetrieveImagePullSecret event, as kubelet's: the pull is tried without them.
func (m *imageManager) credentials(ctx context.Context, pod *corev1.Pod, image string) ([]*runtimeapi.AuthConfig, error) {
	if len(pod.Spec.ImagePullSecrets) == 0 && m.nodeCredentials == nil {
		return nil, nil
	}
	n, err := parseImageName(image)
	if err != nil {
		return nil, fmt.Errorf("couldn't parse image name %q: %w", image, err)
	}
	creds, err := m.podCredentials(ctx, pod, n)
	if err != nil {
		return nil, err
	}
	if m.nodeCredentials != nil {
		creds = append(creds, m.nodeCredentials(n.domain)...)
	}
	return creds, nil
}

// podCredentials are the credentials of the pod's imagePullSecrets for the image n.
func (m *imageManager) podCredentials(ctx context.Context, pod *corev1.Pod, n imageName) ([]*runtimeapi.AuthConfig, error) {
	if len(pod.Spec.ImagePullSecrets) == 0 {
		return nil, nil
	}
	var secrets []*corev1.Secret
	var missing []string
	for _, ref := range pod.Spec.ImagePullSecrets {
		if ref.Name == "" {
			continue
		}
		s, err := m.objs.secret(ctx, pod.Namespace, ref.Name)
		if err != nil {
			m.log.Info("cannot read an image pull secret: pulling without it", "pod", pod.Namespace+"/"+pod.Name, "secret", ref.Name, "err", err)
			missing = append(missing, ref.Name)
			continue
		}
		secrets = append(secrets, s)
	}
	if len(missing) > 0 {
		m.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedToRetrieveImagePullSecret",
			"Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", strings.Join(missing, ", "))
	}
	k, err := keyringFromSecrets(secrets)
	if err != nil {
		return nil, err
	}
	return k.lookup(n.repo()), nil
}

// pullPolicy is the container's imagePullPolicy, defaulted as the API server does: Always for an image tagged
// latest or with neither tag nor digest, else IfNotPresent.
func pullPolicy(c *corev1.Container) corev1.PullPolicy {
	if c.ImagePullPolicy != "" {
		return c.ImagePullPolicy
	}
	if n, err := parseImageName(c.Image); err == nil && (n.tag == defaultTag || n.tag == "" && n.digest == "") {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// ensureImage makes the container's image present and returns its reference; when it cannot, the container
// waits (ok false). A runtime without images (process) records the image, which it cannot fail to have. Then,
// as kubelet's generateContainerConfig does once the image is there, the container's runAsNonRoot is checked
// against its runAsUser (before any pull) and the user the image runs as (admitRunAsUser, admitImageUser): a
// container that would run as root waits too.
func (w *worker) ensureImage(ctx context.Context, pod *corev1.Pod, c *corev1.Container, sbConfig *runtimeapi.PodSandboxConfig, ob *observed) (ref string, ok bool) {
	if !w.admitRunAsUser(pod, c, ob) {
		return "", false
	}
	if ref, ok = w.presentImage(ctx, pod, c, sbConfig, ob); !ok || !w.admitImageUser(ctx, pod, c, ob) {
		return "", false
	}
	return ref, true
}

// presentImage makes the container's image present (ensureImage's first half).
func (w *worker) presentImage(ctx context.Context, pod *corev1.Pod, c *corev1.Container, sbConfig *runtimeapi.PodSandboxConfig, ob *observed) (ref string, ok bool) {
	m := w.p.images
	if m == nil {
		return w.recordImage(ctx, pod, c, sbConfig, ob)
	}
	st := w.pulls[c.Image]
	if st == nil {
		st = &imagePull{}
		w.pulls[c.Image] = st
	}
	st.beforePull = w.leaveStart
	ref, reason, msg := m.ensure(ctx, pod, c, sbConfig, st)
	st.beforePull = nil
	if reason != "" {
		ob.waiting[c.Name] = [2]string{reason, msg}
		return "", false
	}
	delete(w.pulls, c.Image)
	return ref, true
}

// recordImage hands the image to a runtime that only records it (Images is not an ImageService), if any.
func (w *worker) recordImage(ctx context.Context, pod *corev1.Pod, c *corev1.Container, sbConfig *runtimeapi.PodSandboxConfig, ob *observed) (ref string, ok bool) {
	if w.p.cfg.Images == nil {
		return "", true
	}
	ref, err := w.p.cfg.Images.PullImage(ctx, &runtimeapi.ImageSpec{Image: c.Image}, nil, sbConfig)
	if err != nil {
		ob.waiting[c.Name] = [2]string{"ErrImagePull", err.Error()}
		w.p.cfg.Recorder.Eventf(pod, corev1.EventTypeWarning, "Failed", "Error: %v", err)
		return "", false
	}
	w.p.cfg.Recorder.Eventf(pod, corev1.EventTypeNormal, "Pulled", "Container image %q recorded: the %s runtime runs the container's command on the node and pulls no image", c.Image, w.p.cfg.RuntimeName)
	return ref, true
}
