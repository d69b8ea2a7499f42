package kubeapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/wheelhouse-dev/wheelhouse/server/clientip"
	"github.com/wheelhouse-dev/wheelhouse/server/resources"
	"github.com/wheelhouse-dev/wheelhouse/server/satoken"
	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
	"github.com/wheelhouse-dev/wheelhouse/store"
	"github.com/wheelhouse-dev/wheelhouse/version"
)

// Storage is what the API needs of the object store (*store.Store implements it).
type Storage interface {
	Get(ctx context.Context, key store.Key) (store.Object, error)
	List(ctx context.Context, opts store.ListOptions) (store.ListResult, error)
	Create(ctx context.Context, key store.Key, value []byte) (store.Object, error)
	Update(ctx context.Context, key store.Key, value []byte, expectRev int64) (store.Object, error)
	Delete(ctx context.Context, key store.Key, expectRev int64) (store.Object, error)
	Watch(ctx context.Context, opts store.WatchOptions) (*store.Watcher, error)
	CurrentRevision(ctx context.Context) (int64, error)
}

var _ Storage = (*store.Store)(nil)

// Cluster is what the API needs to know of a cluster.
type Cluster struct {
	ID          string
	ServiceCIDR string // default 10.96.0.0/12
	PodCIDR     string // the nodes' pod CIDRs are carved from it (controllers' node IPAM); default 10.244.0.0/16
}

// Clusters finds the cluster named in a URL. It returns ErrClusterNotFound for an unknown id.
type Clusters interface {
	Cluster(ctx context.Context, id string) (Cluster, error)
}

// ErrClusterNotFound is returned by Clusters for an unknown cluster id.
var ErrClusterNotFound = errors.New("kubeapi: cluster not found")

// User is an authenticated caller.
type User struct {
	Name   string
	UID    string
	Groups []string
	// Extra is what upstream's authenticators add (a ServiceAccount token's credential ID, bound pod and node),
	// shown by SelfSubjectReview and TokenReview.
	Extra map[string][]string
	// Revision, when set, is the store revision at authentication: authorization decides on RBAC state at least
	// this new, so a change committed anywhere before the request applies to it.
	Revision int64
}

// Authenticator checks a bearer token for a request to cluster: ErrUnauthenticated for a token it does not
// accept, ErrClusterNotFound when the caller may not know the cluster exists (not a member of its team).
type Authenticator interface {
	AuthenticateToken(ctx context.Context, cluster, token string) (User, error)
}

// ErrUnauthenticated is returned by an Authenticator for a token it does not accept.
var ErrUnauthenticated = errors.New("kubeapi: unauthenticated")

// Attributes describe one request for authorization.
type Attributes struct {
	User        User
	Cluster     string
	Verb        string
	Group       string
	Resource    string
	Subresource string
	Namespace   string
	Name        string
	// Path is set for requests that are not about a resource (discovery, OpenAPI).
	Path string
}

// MinRevision is the store revision the decision must reflect (User.Revision).
func (a Attributes) MinRevision() int64 { return a.User.Revision }

// Authorizer decides whether a request may proceed; reason is shown to a refused caller.
type Authorizer interface {
	Authorize(ctx context.Context, a Attributes) (allowed bool, reason string, err error)
}

// AdmissionRequest is a write about to be stored: after defaulting for the mutating steps, after validation too
// for the validating ones.
type AdmissionRequest struct {
	User      User
	Cluster   string
	Operation string // CREATE or UPDATE
	Resource  *resources.Resource
	// Subresource is "" or the subresource written ("status", "scale", ...).
	Subresource string
	Namespace   string
	Name        string
	Object      runtime.Object
	OldObject   runtime.Object // nil on CREATE
}

// Admission checks a write before it is stored, in upstream's two phases: Admit (mutating admission) runs after
// defaulting and before validation and may change req.Object — what it adds is validated with the rest, and an
// update that drops what it added gets it back before validation compares old and new; Validate (validating
// admission) runs after validation and must not change the object. An error refuses the write (return an
// apierrors status error, such as Forbidden, to choose the answer; any other error is an internal error).
type Admission interface {
	Admit(ctx context.Context, req AdmissionRequest) error
	Validate(ctx context.Context, req AdmissionRequest) error
}

// OpenAPI serves the OpenAPI documents (server/openapi.Spec implements it).
type OpenAPI interface {
	ServeV2(w http.ResponseWriter, r *http.Request)
	ServeV3Root(w http.ResponseWriter, r *http.Request, prefix string)
	ServeV3GroupVersion(w http.ResponseWriter, r *http.Request, prefix, gvPath string)
}

// Config configures the Kubernetes API.
type Config struct {
	Storage       Storage
	Registry      *resources.Registry
	Clusters      Clusters
	Authenticator Authenticator
	Authorizer    Authorizer
	OpenAPI       OpenAPI // optional: without it /openapi/* is 404
	// TypeConverter gives server-side apply the schema of every kind (managedfields.NewTypeConverter over the
	// OpenAPI models). Default: a deduced converter, which treats every list as atomic.
	TypeConverter managedfields.TypeConverter
	Version       version.Info
	Logger        *slog.Logger
	// MaxBodyBytes bounds request bodies (default 3 MiB, upstream's limit).
	MaxBodyBytes int64
	// MaxMutatingInFlight and MaxReadOnlyInFlight bound concurrent requests (defaults 200 and 400, upstream's);
	// past them requests wait up to InFlightWait (default 2 s; negative: not at all) for a slot, then get 429
	// with Retry-After. Watches and in-process requests (the controllers', the scheduler's) are not counted.
	MaxMutatingInFlight, MaxReadOnlyInFlight int
	InFlightWait                             time.Duration
	// MaxStoreFallbacks bounds the lists and watch set-ups of cached resources that the cache cannot serve and
	// the store must (a revision before the cache's window, a cache that did not catch up in time); past it, after
	// a short wait, they get 429 with Retry-After (default 8, half the store's read pool). Under overload these are
	// the reads that grow with the load: a thousand agents' watches resuming at once would otherwise queue a
	// thousand full lists on the store.
	MaxStoreFallbacks int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// WatchCache serves watches and lists from memory (server/watchcache). Nil: New makes one on Storage when
	// Storage can feed it (a watchcache.Source, as *store.Store is) and Close closes it. DisableWatchCache
	// sends every list, watch and namespace check to Storage (the perf harness compares both); the cache still
	// feeds RBACSource.
	WatchCache        *watchcache.Cache
	DisableWatchCache bool
	// APIEndpoint is the address the API is advertised at, written by EnsureCluster as the Endpoints and
	// EndpointSlice of every cluster's default/kubernetes Service (zero: none are written).
	APIEndpoint netip.AddrPort
	// ClusterObjects are extra objects EnsureCluster creates in every cluster when they are missing (the
	// built-in RBAC roles and bindings).
	ClusterObjects func() []runtime.Object
	// Admission mutates writes before validation and checks them after it (optional: service accounts,
	// priorities, default tolerations, RBAC's escalation check, ...).
	Admission Admission
	// Rules answers SelfSubjectRulesReview (optional).
	Rules RulesResolver
	// Auditor records mutating requests (optional).
	Auditor Auditor
	// ServiceAccountTokens issues TokenRequests and authenticates ServiceAccount tokens (optional: without it
	// serviceaccounts/token is 404 and JWT bearer tokens go to the Authenticator like any other).
	ServiceAccountTokens *satoken.Tokens
	// Connector serves pods/log, pods/exec, pods/attach, pods/portforward, pods/proxy, services/proxy and
	// nodes/proxy (optional: without it they are 404).
	Connector Connector
}

func (c *Config) setDefaults() {
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 3 << 20
	}
	if c.MaxMutatingInFlight == 0 {
		c.MaxMutatingInFlight = 200
	}
	if c.MaxReadOnlyInFlight == 0 {
		c.MaxReadOnlyInFlight = 400
	}
	if c.InFlightWait == 0 {
		c.InFlightWait = 2 * time.Second
	}
	if c.MaxStoreFallbacks == 0 {
		c.MaxStoreFallbacks = 8
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Version == (version.Info{}) {
		c.Version = version.Get()
	}
}

// Validate reports a Config that cannot work.
func (c *Config) Validate() error {
	if c.Storage == nil || c.Registry == nil || c.Clusters == nil || c.Authenticator == nil || c.Authorizer == nil {
		return errors.New("kubeapi: Storage, Registry, Clusters, Authenticator and Authorizer are required")
	}
	return nil
}

// sharedEventsSize bounds the object versions kept decoded for watchers (a few thousand recent writes).
const sharedEventsSize = 8192

// API serves the Kubernetes REST API of every cluster under /clusters/<id>/.
type API struct {
	cfg      Config
	log      *slog.Logger
	mutating chan struct{} // in-flight slots for writes
	readOnly chan struct{} // in-flight slots for reads
	// mutatingWaiting and readOnlyWaiting count the requests waiting for a slot.
	mutatingWaiting, readOnlyWaiting atomic.Int64
	// longRunning holds the long-running requests in flight, for re-checks (longrunning.go).
	longRunning longRunningSet
	// fallbacks: slots for store reads of cached resources (Config.MaxStoreFallbacks).
	fallbacks chan struct{}
	managers  *fieldManagers
	shared    *sharedEvents     // decoded and encoded watch objects of store-fed watches, shared by watchers
	written   *recentWrites     // objects this process wrote lately, decoded, for the watch cache
	cache     *watchcache.Cache // nil when disabled
	// localOnce and local: the Echo instance of in-process requests (local.go).
	localOnce sync.Once
	local     *echo.Echo
	// liveNamespaces are namespaces this process deleted lately: creates in them check the store, not the cache.
	liveNamespaces liveLookups
	ownCache       bool // cache was made by New: Close closes it
}

// New builds the API.
func New(cfg Config) (*API, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &API{cfg: cfg, log: cfg.Logger,
		mutating:       make(chan struct{}, cfg.MaxMutatingInFlight),
		readOnly:       make(chan struct{}, cfg.MaxReadOnlyInFlight),
		fallbacks:      make(chan struct{}, cfg.MaxStoreFallbacks),
		managers:       newFieldManagers(cfg.TypeConverter),
		shared:         newSharedEvents(sharedEventsSize),
		written:        newRecentWrites(recentWritesSize),
		cache:          cfg.WatchCache,
		liveNamespaces: liveLookups{until: map[string]time.Time{}},
	}
	if src, ok := cfg.Storage.(watchcache.Source); ok && a.cache == nil {
		a.cache = watchcache.New(watchcache.Config{Source: src, Index: cacheIndex, Logger: cfg.Logger.With("component", "watchcache")})
		a.ownCache = true
	}
	return a, nil
}

// cacheIndex is the watch cache's secondary index: pods by spec.nodeName (the node authorizer's question).
// cacheIndexField is the field of pods that cacheIndex indexes.
const cacheIndexField = "spec.nodeName"

func cacheIndex(resource string) func(runtime.Object) string {
	if resource != "pods" {
		return nil
	}
	return func(obj runtime.Object) string {
		if p, ok := obj.(*corev1.Pod); ok {
			return p.Spec.NodeName
		}
		return ""
	}
}

// Close stops the watch cache New made; watches it serves end (clients resume elsewhere).
func (a *API) Close() {
	if a.ownCache {
		a.cache.Close()
	}
}

// Register mounts the API on e.
func (a *API) Register(e *echo.Echo) {
	e.Any("/clusters/:cluster", a.handle)
	e.Any("/clusters/:cluster/*", a.handle)
}

// Prefix is the URL path prefix of a cluster's API: the server of its kubeconfig, below the server URL.
func Prefix(cluster string) string { return "/clusters/" + cluster }

// handle is the request pipeline: find the cluster, authenticate, route, authorize, serve. It answers every
// error itself as a Status and returns nil to Echo.
func (a *API) handle(c echo.Context) error {
	req := c.Request()
	rq := &request{api: a, w: c.Response(), r: req, ctx: req.Context(), cluster: Cluster{ID: c.Param("cluster")}}
	rq.prefix = Prefix(rq.cluster.ID)
	rq.path = strings.TrimPrefix(req.URL.Path, rq.prefix)
	rq.out, _ = negotiate(req.Header.Get("Accept"), "Table", "PartialObjectMetadata", "PartialObjectMetadataList",
		"APIGroupDiscoveryList")
	if rq.out.info.Serializer == nil {
		rq.out, _ = negotiate("application/json")
	}
	defer func() {
		if p := recover(); p != nil {
			rq.fail(internalf("panic: %v", p))
		}
	}()
	if err := rq.serve(); err != nil {
		rq.fail(err)
	}
	rq.audit(c.Response().Status)
	return nil
}

// AuditRecord is one mutating Kubernetes API request, whatever its result, authenticated or not. Its Verb is
// never empty: the resource verb (create, update, patch, delete, deletecollection), else the lower-case HTTP
// method (upstream's non-resource verbs), known before authentication.
type AuditRecord struct {
	At                           time.Time
	Cluster                      string
	User                         User   // empty when the request was not authenticated
	Verb                         string // never empty, see above
	Group, Resource, Subresource string
	Namespace, Name              string
	Path                         string
	Code                         int
	Source, UserAgent            string
	DryRun                       bool
}

// Auditor receives the record of every mutating request. It must not block (queue and write in batches).
type Auditor interface {
	Record(AuditRecord)
}

// audit hands a mutating request's record to the auditor.
func (rq *request) audit(code int) {
	if rq.api.cfg.Auditor == nil {
		return
	}
	switch rq.r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return
	}
	if rq.res != nil && rq.res.Virtual {
		return // access reviews change nothing
	}
	verb := rq.info.verb
	if verb == "" { // not a resource, or a method no verb maps: upstream's non-resource verb
		verb = strings.ToLower(rq.r.Method)
	}
	rq.api.cfg.Auditor.Record(AuditRecord{At: rq.api.cfg.Now(), Cluster: rq.cluster.ID, User: rq.user, Verb: verb,
		Group: rq.info.gv.Group, Resource: rq.info.plural, Subresource: rq.info.subresource, Namespace: rq.info.namespace,
		Name: rq.info.name, Path: rq.r.URL.Path, Code: code, Source: clientip.Of(rq.r), UserAgent: rq.r.UserAgent(),
		DryRun: rq.r.URL.Query().Get("dryRun") != ""})
}

// request is one API request in flight.
type request struct {
	api     *API
	w       http.ResponseWriter
	r       *http.Request
	ctx     context.Context
	cluster Cluster
	prefix  string // "/clusters/<id>"
	path    string // below prefix
	user    User
	info    requestInfo
	res     *resources.Resource
	out     output
	// impersonating: user is the identity the caller impersonates (Impersonate-User), not the caller's own.
	impersonating bool
	// lr tracks a long-running request (nil for others); see longrunning.go.
	lr *longRunning
}

func (rq *request) serve() error {
	// What the URL names, verb included, is known before authentication, so that a refused request is audited
	// with its real action.
	q := rq.r.URL.Query()
	rq.info = parseRequestInfo(rq.r.Method, rq.path, q.Get("watch") == "true" || q.Get("watch") == "1")
	user, err := rq.authenticate()
	if errors.Is(err, ErrClusterNotFound) {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "clusters"}, rq.cluster.ID)
	} else if err != nil {
		return err
	}
	rq.user = user
	cl, err := rq.api.cfg.Clusters.Cluster(rq.ctx, rq.cluster.ID)
	if errors.Is(err, ErrClusterNotFound) {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "clusters"}, rq.cluster.ID)
	} else if err != nil {
		return internal(err)
	}
	rq.cluster = cl
	defer rq.trackLongRunning()()
	if err := rq.impersonate(); err != nil {
		return err
	}
	rq.impersonating = rq.r.Header.Get(headerImpersonateUser) != ""
	if !rq.info.resource {
		if err := rq.authorize(Attributes{Verb: strings.ToLower(rq.r.Method), Path: rq.path}); err != nil {
			return err
		}
		return rq.serveNonResource()
	}
	return rq.serveResource()
}

func (rq *request) authenticate() (User, error) {
	if u, ok := localUser(rq.ctx); ok {
		return u, nil // an in-process request of the server's own components (LocalConfig)
	}
	h := rq.r.Header.Get("Authorization")
	token, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || strings.TrimSpace(token) == "" {
		return User{}, apierrors.NewUnauthorized("Unauthorized: a bearer token is required")
	}
	u, err := rq.authenticateToken(strings.TrimSpace(token), satoken.APIAudience)
	switch {
	case errors.Is(err, ErrUnauthenticated):
		return User{}, apierrors.NewUnauthorized("Unauthorized")
	case errors.Is(err, ErrClusterNotFound):
		return User{}, err
	case err != nil:
		return User{}, internal(err)
	}
	return u, nil
}

// authenticateToken checks a bearer token for the request's cluster: a ServiceAccount token (for one of
// audiences) or, through the Authenticator, any other (an API token of the platform, whose audience is the API).
func (rq *request) authenticateToken(token string, audiences ...string) (User, error) {
	if rq.api.cfg.ServiceAccountTokens != nil && satoken.LooksLikeJWT(token) {
		return rq.serviceAccountUser(token, audiences...)
	}
	if !slices.Contains(audiences, satoken.APIAudience) {
		return User{}, ErrUnauthenticated
	}
	return rq.api.cfg.Authenticator.AuthenticateToken(rq.ctx, rq.cluster.ID, token)
}

func (rq *request) authorize(attrs Attributes) error {
	attrs.User, attrs.Cluster = rq.user, rq.cluster.ID
	ok, reason, err := rq.api.cfg.Authorizer.Authorize(rq.ctx, attrs)
	if err != nil {
		return internal(err)
	}
	if ok {
		rq.granted(attrs)
		return nil
	}
	return forbiddenFor(attrs, reason)
}

// forbiddenFor is upstream's refusal: `pods "x" is forbidden: User "u" cannot get resource "pods" in API group
// "" in the namespace "n"`, plus the authorizer's reason when it gave one.
func forbiddenFor(attrs Attributes, reason string) error {
	gr := schema.GroupResource{Group: attrs.Group, Resource: attrs.Resource}
	var msg string
	if attrs.Resource == "" {
		msg = fmt.Sprintf("User %q cannot %s path %q", attrs.User.Name, attrs.Verb, attrs.Path)
	} else {
		resource := attrs.Resource
		if attrs.Subresource != "" {
			resource += "/" + attrs.Subresource
		}
		msg = fmt.Sprintf("User %q cannot %s resource %q in API group %q", attrs.User.Name, attrs.Verb, resource, attrs.Group)
		if attrs.Namespace != "" {
			msg += fmt.Sprintf(" in the namespace %q", attrs.Namespace)
		} else {
			msg += " at the cluster scope"
		}
	}
	if reason != "" {
		msg += ": " + reason
	}
	return apierrors.NewForbidden(gr, attrs.Name, errors.New(msg))
}

// fail writes err as a Status and logs internal errors.
func (rq *request) fail(err error) {
	if errors.Is(err, context.Canceled) && rq.ctx.Err() != nil {
		return // the client went away
	}
	st := statusFor(err)
	if st.Code >= 500 {
		rq.api.log.ErrorContext(rq.ctx, "kubernetes API request failed", "err", err, "method", rq.r.Method,
			"path", rq.r.URL.Path, "cluster", rq.cluster.ID)
	}
	if st.Code == http.StatusTooManyRequests || st.Code == http.StatusServiceUnavailable {
		rq.w.Header().Set("Retry-After", "1")
	}
	rq.write(int(st.Code), &st)
}
