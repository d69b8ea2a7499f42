package kubelet

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/wheelhouse-dev/wheelhouse/agents/dns"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
)

// PodsConfig configures the pod manager. Zero fields take the defaults noted.
type PodsConfig struct {
	NodeName string
	Runtime  runtime.Runtime
	// RuntimeName prefixes container IDs in pod statuses ("process://...").
	RuntimeName string
	// Images pulls (or records) images before a container is created; nil: none. When it is a
	// runtime.ImageService (a runtime that runs images: containerd over CRI), the image manager applies the pull
	// policy, the pod's pull secrets and the pull back-off, and collects unused images (ImageGC); otherwise (the
	// process runtime) the image is only recorded, with a Pulled event saying so.
	Images runtime.ImagePuller
	// ImageGC configures image garbage collection, with an ImageService only.
	ImageGC ImageGCPolicy
	// ImagePulls limits image pulls as kubelet's serializeImagePulls and maxParallelImagePulls do (with an
	// ImageService only; the zero value pulls one image at a time, kubelet's default).
	ImagePulls ImagePullLimits
	// NodeCredentials are the node's own registry credentials for an image's registry host (kubelet's node-level
	// keyring: a registries.yaml's, agents/registries), tried after the pod's imagePullSecrets; nil: none.
	NodeCredentials func(host string) []*runtimeapi.AuthConfig
	// DataDir holds pods/<uid>/volumes and logs/pods (the containers' log files).
	DataDir string
	// NodeIP is the node's InternalIP (hostIP of its pods).
	NodeIP func() string
	// MaxParallelStarts is how many pods start at once at most, the others waiting their turn in the order they
	// came (default 2 × the CPUs the agent may use; negative: no limit). A start lasts from creating the pod's
	// sandbox until its containers have been started, 10 s at most; image pulls do not count.
	MaxParallelStarts int
	// startHold is how long one start holds its place at most (default defaultStartHold); for tests.
	startHold time.Duration
	// Resync is how often each pod is compared with the runtime (upstream's relist; default 1 s, real time).
	Resync time.Duration
	// HandlersSucceed makes every probe and lifecycle hook succeed at once without running it (no exec, no
	// connection, no sleep), for hollow nodes: their containers run nothing and their pods have no network, so
	// an httpGet, tcpSocket or grpc probe could never pass. Probe timing (initialDelaySeconds, periodSeconds,
	// thresholds) still applies; the runtime is never asked. Off for real nodes.
	HandlersSucceed bool
	// DNS is the node's cluster DNS: each pod's sandbox gets the resolver of its dnsPolicy (a pod asking for
	// cluster DNS on a node without any gets the host's, with a MissingClusterDNS event).
	DNS dns.ClusterDNS
	// Services lists the Services whose variables containers get (KUBERNETES_SERVICE_HOST and the service
	// links); nil: none.
	Services corelisters.ServiceLister
	Clock    clock.WithTicker
	Recorder record.EventRecorder
	Logger   *slog.Logger
}

func (c PodsConfig) withDefaults() PodsConfig {
	if c.Resync == 0 {
		c.Resync = time.Second
	}
	if c.MaxParallelStarts == 0 {
		c.MaxParallelStarts = 2 * goruntime.GOMAXPROCS(0)
	}
	if c.startHold == 0 {
		c.startHold = defaultStartHold
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Recorder == nil {
		c.Recorder = &record.FakeRecorder{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.RuntimeName == "" {
		c.RuntimeName = "process"
	}
	return c
}

// Pods runs the pods bound to one node: one worker goroutine per pod converges the runtime to the pod's spec
// and writes the pod's status.
type Pods struct {
	cfg  PodsConfig
	cs   kubernetes.Interface
	objs objects
	vols volumes
	log  *slog.Logger
	// images is the image manager, with a runtime that runs images (nil: Images only records them).
	images *imageManager

	alloc  *allocations // the resources allocated to each pod (in-place resize)
	stats  usageSampler // CPU readings between summaries
	starts *startGate   // nil: no limit
	// runtimeDown is set while pod workers find the runtime unreachable (their syncs skipped), so that an outage
	// is logged once rather than by every pod at every sync.
	runtimeDown atomic.Bool

	mu      sync.Mutex // guards workers
	workers map[types.UID]*worker
	wg      sync.WaitGroup
}

// NewPods returns the pod manager of a node; cs carries the node's credential.
func NewPods(cs kubernetes.Interface, cfg PodsConfig) (*Pods, error) {
	if cfg.NodeName == "" || cfg.Runtime == nil || cfg.DataDir == "" || cfg.NodeIP == nil {
		return nil, errors.New("kubelet: the pod manager needs a node name, a runtime, a data dir and the node's IP")
	}
	cfg = cfg.withDefaults()
	alloc, err := loadAllocations(filepath.Join(cfg.DataDir, allocationsFile))
	if err != nil {
		return nil, err
	}
	o := objects{cs: cs, services: cfg.Services, node: cfg.NodeName}
	p := &Pods{cfg: cfg, cs: cs, objs: o, vols: volumes{o: o, podsDir: filepath.Join(cfg.DataDir, "pods"), tokens: newTokenCache(cfg.Clock.Now)},
		log: cfg.Logger.With("node", cfg.NodeName), workers: map[types.UID]*worker{},
		starts: newStartGate(cfg.MaxParallelStarts, cfg.startHold), alloc: alloc}
	if svc, ok := cfg.Images.(runtime.ImageService); ok {
		policy := cfg.ImageGC.withDefaults()
		if err := policy.validate(); err != nil {
			return nil, err
		}
		slots, err := cfg.ImagePulls.slots()
		if err != nil {
			return nil, err
		}
		p.images = &imageManager{svc: svc, objs: o, clock: cfg.Clock, recorder: cfg.Recorder, log: p.log.With("component", "images"),
			gc:    newImageGC(svc, cfg.Runtime, policy, cfg.Clock, cfg.Recorder, cfg.NodeName, p.log.With("component", "imagegc")),
			slots: slots, nodeCredentials: cfg.NodeCredentials}
	}
	return p, nil
}

func (p *Pods) logDir() string { return filepath.Join(p.cfg.DataDir, "logs", "pods") }

// Run watches the node's pods and runs them until ctx ends. Pods keep running when the agent stops: a new
// agent adopts them from the runtime. Sandboxes of pods that no longer exist are removed.
func (p *Pods) Run(ctx context.Context) error {
	lw := cache.NewFilteredListWatchFromClient(p.cs.CoreV1().RESTClient(), "pods", metav1.NamespaceAll,
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", p.cfg.NodeName).String()
		})
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.update(ctx, obj.(*corev1.Pod)) },
		UpdateFunc: func(_, obj any) { p.update(ctx, obj.(*corev1.Pod)) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				p.gone(pod.UID)
			}
		},
	})
	if err != nil {
		return err
	}
	go inf.Run(ctx.Done())
	if p.images != nil {
		p.wg.Go(func() { p.images.gc.run(ctx) })
	}
	// Synced once the handler has seen every pod (not only the informer's store): a pod without a worker yet
	// would be taken for gone.
	if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced, reg.HasSynced) {
		p.collectOrphans(ctx)
	}
	t := p.cfg.Clock.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			p.wg.Wait()
			return nil
		case <-t.C():
			p.collectOrphans(ctx)
		}
	}
}

// update hands the pod's latest version to its worker, starting one for a pod not seen before.
func (p *Pods) update(ctx context.Context, pod *corev1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.workers[pod.UID]
	if !ok {
		w = newWorker(p, pod.UID)
		p.workers[pod.UID] = w
	}
	w.set(pod) // before the worker starts: its first sync reads the pod
	if !ok {
		p.wg.Go(func() { w.loop(ctx) })
	}
}

// gone tells a pod's worker that the pod was removed from the API.
func (p *Pods) gone(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w, ok := p.workers[uid]; ok {
		w.markGone()
	}
}

// done forgets a worker that finished.
func (p *Pods) done(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.workers, uid)
}

// collectOrphans stops and removes sandboxes of pods this node no longer runs (deleted while the agent was
// down), then the directories (volumes and all, poddir.go) of pods that have neither a worker nor a sandbox left.
// Pods still known to a worker are left to it.
func (p *Pods) collectOrphans(ctx context.Context) {
	// The directories are listed before any worker is asked about: one made after this list is a new pod's.
	dirs, err := os.ReadDir(p.vols.podsDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		p.log.Warn("listing the pod directories failed", "err", err)
	}
	sandboxes, err := p.cfg.Runtime.ListPodSandbox(ctx, nil)
	if err != nil {
		p.log.Warn("listing the runtime's sandboxes failed", "err", err)
		return
	}
	// The allocations of pods that no longer have a worker (gone while the agent was down, or since) go too.
	if err := p.alloc.retain(func(uid types.UID) bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		_, known := p.workers[uid]
		return known
	}); err != nil {
		p.log.Warn("writing the pod resource allocations failed", "err", err)
	}
	left := map[types.UID]bool{} // pods whose sandbox is still there
	for _, sb := range sandboxes {
		uid := types.UID(sb.Labels[labelPodUID])
		if p.known(uid) || uid == "" {
			continue
		}
		p.log.Info("removing the sandbox of a pod that is gone", "pod", sb.Labels[labelPodNamespace]+"/"+sb.Labels[labelPodName], "uid", uid)
		p.stopContainers(ctx, sb.Id, 0)
		if err := p.cfg.Runtime.RemovePodSandbox(ctx, sb.Id); err != nil {
			left[uid] = true
			p.log.Warn("removing an orphaned sandbox failed", "sandbox", sb.Id, "err", err)
		}
	}
	for _, d := range dirs {
		uid := types.UID(d.Name())
		if !d.IsDir() || left[uid] || p.known(uid) {
			continue
		}
		p.log.Info("removing the directory of a pod that is gone", "uid", uid)
		if err := p.vols.removePodDir(uid); err != nil {
			p.log.Warn("removing an orphaned pod directory failed", "uid", uid, "err", err)
		}
	}
}

// known reports whether a worker runs the pod.
func (p *Pods) known(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.workers[uid]
	return ok
}

// stopContainers stops a sandbox's running containers with the grace period (seconds).
func (p *Pods) stopContainers(ctx context.Context, sandboxID string, grace int64) {
	running := runtimeapi.ContainerState_CONTAINER_RUNNING
	list, err := p.cfg.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: sandboxID,
		State: &runtimeapi.ContainerStateValue{State: running}})
	if err != nil {
		return
	}
	var wg sync.WaitGroup
	for _, c := range list {
		wg.Go(func() { _ = p.cfg.Runtime.StopContainer(ctx, c.Id, grace) })
	}
	wg.Wait()
}
