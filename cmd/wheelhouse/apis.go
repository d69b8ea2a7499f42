package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/wheelhouse-dev/wheelhouse/agents/install"
	"github.com/wheelhouse-dev/wheelhouse/agents/tunnel"
	"github.com/wheelhouse-dev/wheelhouse/controllers"
	"github.com/wheelhouse-dev/wheelhouse/controllers/leader"
	"github.com/wheelhouse-dev/wheelhouse/rbac"
	"github.com/wheelhouse-dev/wheelhouse/scheduler"
	admissionpkg "github.com/wheelhouse-dev/wheelhouse/server/admission"
	"github.com/wheelhouse-dev/wheelhouse/server/agentapi"
	"github.com/wheelhouse-dev/wheelhouse/server/clusterca"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
	"github.com/wheelhouse-dev/wheelhouse/server/openapi"
	"github.com/wheelhouse-dev/wheelhouse/server/platform"
	"github.com/wheelhouse-dev/wheelhouse/server/resources"
	"github.com/wheelhouse-dev/wheelhouse/server/satoken"
	"github.com/wheelhouse-dev/wheelhouse/store"
	"github.com/wheelhouse-dev/wheelhouse/tenancy"
	"github.com/wheelhouse-dev/wheelhouse/version"
	"github.com/wheelhouse-dev/wheelhouse/web"
)

// apis bootstraps the first team, cluster and admin (printing generated secrets once), makes sure every
// cluster has its system objects, and returns the routes of the Kubernetes API of every cluster and of the
// platform API. caPEM is the CA of the serving certificate (nil for a given certificate). The caller closes ten.
func apis(ctx context.Context, cfg serverConfig, ten *tenancy.Store, st *store.Store, caPEM []byte, self replica, log *slog.Logger) ([]func(*echo.Echo), func(), error) {
	// install.sh and the agent binaries, public: machines fetch them before they join.
	installer, err := install.New(install.Config{BinaryDir: cfg.AgentBinaryDir, Logger: log.With("component", "install")})
	if err != nil {
		return nil, nil, err
	}
	res, err := ten.Bootstrap(ctx, tenancy.BootstrapConfig{Token: cfg.BootstrapToken, Password: cfg.BootstrapPassword})
	if err != nil {
		return nil, nil, fmt.Errorf("bootstrap: %w", err)
	}
	if res.TokenUnusable {
		log.Warn("WHEELHOUSE_BOOTSTRAP_TOKEN names a revoked or expired token; it will not authenticate")
	}
	printSecrets(res)
	reg := resources.Default()
	spec, err := openapi.Build(reg, version.Get().GitVersion)
	if err != nil {
		return nil, nil, fmt.Errorf("build OpenAPI: %w", err)
	}
	tc, err := managedfields.NewTypeConverter(spec.Models(), false)
	if err != nil {
		return nil, nil, fmt.Errorf("OpenAPI models: %w", err)
	}
	// The authorizer reads RBAC objects through the API's watch cache, so it is bound once the API exists.
	authz := &rbacAuthorizer{}
	adm := &admission{r: authz, tolerations: admissionpkg.DefaultTolerationSeconds{Seconds: cfg.tolerationSeconds()}}
	auditW := ten.NewAuditWriter(tenancy.AuditWriterConfig{})
	saTokens := satoken.New(ten, nil)
	// Node agents keep their tunnels on the agent endpoint; pods/log, exec, attach, portforward and nodes/proxy
	// reach kubelets through them, on whichever replica holds the node's tunnel (the directory in the database
	// says which).
	dir := tunnelDirectory{ten: ten, self: self}
	tunnels := tunnel.NewRegistry(tunnel.RegistryConfig{Logger: log.With("component", "tunnel"), Directory: dir})
	// Each cluster's own CA signs its nodes' in-cluster API endpoints and is published in kube-root-ca.crt.
	cas, err := clusterca.New(clusterca.Config{Store: ten, APIServiceIP: func(ctx context.Context, id string) (netip.Addr, error) {
		cl, err := clusterSource{ten}.Cluster(ctx, id)
		if err != nil {
			return netip.Addr{}, err
		}
		return kubeapi.APIServiceIP(cl)
	}})
	if err != nil {
		auditW.Close()
		return nil, nil, err
	}
	agents, err := agentapi.New(agentapi.Config{Authenticator: tokenAuthenticator{ten}, Tunnels: tunnels,
		Peers: dir, PeerTransport: self.transport, Certificates: cas, Logger: log.With("component", "agentapi")})
	if err != nil {
		auditW.Close()
		return nil, nil, err
	}
	auditor := newKubeAuditor(ten, auditW)
	api, err := kubeapi.New(kubeapi.Config{Storage: st, Registry: reg, Clusters: clusterSource{ten},
		Authenticator: tokenAuthenticator{ten}, Authorizer: authz, Admission: adm,
		Rules: rulesResolver{authz}, ClusterObjects: clusterObjects, OpenAPI: spec, TypeConverter: tc,
		Auditor: auditor, ServiceAccountTokens: saTokens, Logger: log.With("component", "kubeapi"),
		DisableWatchCache: cfg.WatchCache == "off", Connector: agents, APIEndpoint: self.apiEndpoint(ctx, log)})
	if err != nil {
		auditW.Close()
		return nil, nil, err
	}
	// Admission steps that read the cluster's objects read them through the API's watch cache too.
	if pcs, ok := reg.Lookup(schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1", Resource: "priorityclasses"}); ok {
		adm.priority = &admissionpkg.Priority{Classes: admissionpkg.CachedPriorityClasses{API: api, Res: pcs}}
	}
	if sas, ok := reg.Lookup(schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}); ok {
		adm.serviceAccount = &admissionpkg.ServiceAccount{Accounts: admissionpkg.CachedServiceAccounts{API: api, Res: sas}}
	}
	if nodes, ok := reg.Lookup(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}); ok {
		adm.podResize = &admissionpkg.PodResize{Nodes: admissionpkg.CachedNodes{API: api, Res: nodes}}
	}
	src, err := api.RBACSource()
	if err == nil {
		authz.a, err = rbac.New(rbac.Config{Source: src, Pods: src, Logger: log.With("component", "rbac")})
	}
	if err != nil {
		api.Close()
		auditW.Close()
		return nil, nil, err
	}
	retention, _ := time.ParseDuration(cfg.AuditRetention) // validated
	pruneCtx, stopPrune := context.WithCancel(context.WithoutCancel(ctx))
	go pruneAudit(pruneCtx, ten, retention, log)
	// Access taken away anywhere (a deleted cluster, a revoked credential, a removed member) reaches this
	// replica's tunnels, long-running requests and per-cluster caches (docs/design/revocation.md).
	rev := &revocation{tunnels: tunnels, api: api, log: log.With("component", "revocation"),
		forget: []func(string){ten.ForgetCluster, auditor.ForgetCluster, authz.a.Forget, saTokens.Forget, cas.Forget}}
	revDone := make(chan struct{})
	revStarted := make(chan struct{})
	go func() {
		defer close(revDone)
		rev.follow(pruneCtx, ten, func() { close(revStarted) })
	}()
	select {
	case <-revStarted:
	case <-time.After(10 * time.Second):
		log.Warn("the access event log is not followed yet; revocations reach this replica once it is")
	}
	closeAll := func() {
		stopPrune()
		<-revDone
		tunnels.Close()
		api.Close()
		auditW.Close()
	}
	clusters, err := ten.Clusters(ctx)
	if err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("list clusters: %w", err)
	}
	for _, c := range clusters {
		if err := api.EnsureCluster(ctx, c.ID); err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("cluster %s: %w", c.ID, err)
		}
	}
	policy, err := rbac.NewPlatform()
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	plat, err := platform.New(platform.Config{Tenancy: ten, Policy: policy, Clusters: clusterLifecycle{api, authz, saTokens, cas},
		CA: caPEM, Logger: log.With("component", "platform")})
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	// The controllers and the scheduler run on the replica holding the controller lease, as in-process API
	// clients with their own identities.
	deps := controllers.Deps{API: api, Registry: reg, Logger: log.With("component", "controllers"), NodeLifecycle: cfg.nodeLifecycle(),
		RootCA: caPEM, ClusterCA: cas.CA}
	schedCfg, err := scheduler.LoadConfig(cfg.SchedulerConfig)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	newScheduler := func(events *controllers.Events) (*scheduler.Scheduler, error) {
		return scheduler.New(scheduler.Deps{API: api, Registry: reg, Logger: log, Config: schedCfg, Recorder: events.For})
	}
	// They stop as soon as the server begins to shut down, not after the HTTP drain: while it drains, the
	// listener refuses the agents' lease renewals, and the node lifecycle controller would take their nodes
	// for lost and evict their pods.
	ctrlCtx, stopCtrl := context.WithCancel(context.WithoutCancel(ctx))
	context.AfterFunc(ctx, stopCtrl)
	ctrlDone := make(chan struct{})
	go func() {
		defer close(ctrlDone)
		err := leader.Run(ctrlCtx, leader.Config{Store: st, Identity: self.id, Logger: log.With("component", "leader")},
			func(lctx context.Context) {
				deps.Events = controllers.NewEvents(deps)
				defer deps.Events.Close()
				sched, err := newScheduler(deps.Events)
				if err != nil {
					log.Error("scheduler not started", "err", err)
					controllers.Run(lctx, deps)
					return
				}
				var wg sync.WaitGroup
				wg.Go(func() { controllers.Run(lctx, deps) })
				wg.Go(func() { sched.Run(lctx) })
				wg.Wait()
			})
		if err != nil {
			log.Error("controller leader election stopped", "err", err)
		}
	}()
	closeAll = func(prev func()) func() {
		return func() {
			stopCtrl()
			<-ctrlDone
			prev()
		}
	}(closeAll)
	dash, err := web.New(web.Config{Tenancy: ten, API: api, Registry: reg, Authorizer: authz, Policy: policy,
		Platform: plat.Handler(), CA: caPEM, Health: health(st), Logger: log.With("component", "web")})
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	return []func(*echo.Echo){api.Register, plat.Register, agents.Register, installer.Register, dash.Register}, closeAll, nil
}

// replicaIdentity names this server process in the controller lease and the tunnel directory: host name,
// PID and a random suffix (as upstream's hostname_uuid), so two replicas in containers that share a host name
// and both run as PID 1 are never taken for one.
func replicaIdentity() string {
	host, err := os.Hostname()
	if err != nil {
		host = "wheelhouse"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

// pruneAudit deletes audit records older than retention, at start and then hourly.
func pruneAudit(ctx context.Context, ten *tenancy.Store, retention time.Duration, log *slog.Logger) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if n, err := ten.PruneAudit(ctx, time.Now().Add(-retention)); err != nil && ctx.Err() == nil {
			log.Warn("pruning the audit log failed", "err", err)
		} else if n > 0 {
			log.Info("pruned the audit log", "records", n, "older than", retention)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// clusterLifecycle creates and removes the Kubernetes side of clusters for the platform API.
type clusterLifecycle struct {
	api    *kubeapi.API
	authz  *rbacAuthorizer
	tokens *satoken.Tokens
	cas    *clusterca.Authority
}

func (l clusterLifecycle) EnsureCluster(ctx context.Context, id string) error {
	return l.api.EnsureCluster(ctx, id)
}

func (l clusterLifecycle) DeleteClusterObjects(ctx context.Context, id string) error {
	if err := l.api.DeleteClusterObjects(ctx, id); err != nil {
		return err
	}
	l.authz.a.Forget(id)
	l.tokens.Forget(id)
	l.cas.Forget(id)
	return nil
}

// printSecrets shows generated bootstrap secrets once, on stderr, outside the structured log.
func printSecrets(res tenancy.BootstrapResult) {
	if res.Token == "" && res.Password == "" {
		return
	}
	fmt.Fprintln(os.Stderr, "\n=== Wheelhouse first start: the admin's credentials (shown only this once) ===")
	fmt.Fprintln(os.Stderr, "  user:     admin@localhost")
	if res.Password != "" {
		fmt.Fprintln(os.Stderr, "  password:", res.Password)
	}
	if res.Token != "" {
		fmt.Fprintln(os.Stderr, "  token:   ", res.Token)
		fmt.Fprintln(os.Stderr, "  kubeconfig: wheelhouse kubeconfig --cluster default --token <token> > kubeconfig")
	}
	fmt.Fprintln(os.Stderr, "=============================================================================")
}

type clusterSource struct{ ten *tenancy.Store }

func (c clusterSource) Cluster(ctx context.Context, id string) (kubeapi.Cluster, error) {
	cl, err := c.ten.Cluster(ctx, id)
	if errors.Is(err, tenancy.ErrNotFound) {
		return kubeapi.Cluster{}, kubeapi.ErrClusterNotFound
	}
	if err != nil {
		return kubeapi.Cluster{}, err
	}
	return kubeapi.Cluster{ID: cl.ID, ServiceCIDR: cl.ServiceCIDR.String(), PodCIDR: cl.PodCIDR.String()}, nil
}

// health reports the control plane on the dashboard's overview: the store answers, and which replica runs the
// controllers and the scheduler.
func health(st *store.Store) func(ctx context.Context) []web.HealthCheck {
	return func(ctx context.Context) []web.HealthCheck {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		out := []web.HealthCheck{{Name: "API server", OK: true, Detail: "serving this page"}}
		rev, err := st.CurrentRevision(ctx)
		if err != nil {
			out = append(out, web.HealthCheck{Name: "Object store (PostgreSQL)", Detail: "not answering"})
		} else {
			out = append(out, web.HealthCheck{Name: "Object store (PostgreSQL)", OK: true, Detail: "revision " + strconv.FormatInt(rev, 10)})
		}
		holder, _, err := leader.Holder(ctx, st, leader.Key)
		switch {
		case err != nil:
			out = append(out, web.HealthCheck{Name: "Controllers and scheduler", Detail: "lease unreadable"})
		case holder == "":
			out = append(out, web.HealthCheck{Name: "Controllers and scheduler", Detail: "no replica leads"})
		default:
			out = append(out, web.HealthCheck{Name: "Controllers and scheduler", OK: true, Detail: "led by " + holder})
		}
		return out
	}
}
