package scheduler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"

	"github.com/wheelhouse-dev/wheelhouse/scheduler/framework"
	"github.com/wheelhouse-dev/wheelhouse/scheduler/plugins"
)

// Configuration is kube-scheduler's own KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1): the
// profiles (scheduler names, plugins enabled or disabled per extension point, score weights, plugin arguments),
// percentageOfNodesToScore, parallelism and the backoff bounds. Fields about kube-scheduler's process
// (clientConnection, leaderElection, extenders) do not apply: Wheelhouse's scheduler runs in the server,
// under the server's lease.
type Configuration = configv1.KubeSchedulerConfiguration

// DefaultSchedulerName is the profile pods get when they name none.
const DefaultSchedulerName = "default-scheduler"

// defaultPlugins is upstream's default profile: the plugins on every extension point they implement, with
// the score weights kube-scheduler uses.
var defaultPlugins = []configv1.Plugin{
	{Name: plugins.NodeUnschedulableName},
	{Name: plugins.NodeNameName},
	{Name: plugins.TaintTolerationName, Weight: ptr(int32(3))},
	{Name: plugins.NodeAffinityName, Weight: ptr(int32(2))},
	{Name: plugins.NodePortsName},
	{Name: plugins.NodeResourcesFitName, Weight: ptr(int32(1))},
	{Name: plugins.PodTopologySpreadName, Weight: ptr(int32(2))},
	{Name: plugins.InterPodAffinityName, Weight: ptr(int32(2))},
	{Name: plugins.DefaultPreemptionName},
	{Name: plugins.NodeResourcesBalancedAllocName, Weight: ptr(int32(1))},
}

// Plugins named in configurations that Wheelhouse accepts but that have nothing to do here: queue sorting and
// binding are the scheduler's own (priority then time; pods/binding), and volume plugins wait for volumes.
var builtinPlugins = []string{"PrioritySort", "DefaultBinder", "ImageLocality", "VolumeRestrictions", "VolumeBinding",
	"VolumeZone", "NodeVolumeLimits", "EBSLimits", "GCEPDLimits", "AzureDiskLimits", "SchedulingGates", "DynamicResources"}

func ptr[T any](v T) *T { return &v }

// LoadConfig reads a KubeSchedulerConfiguration file ("" is the defaults), fills in defaults and validates
// it; errors name the field.
func LoadConfig(path string) (*Configuration, error) {
	cfg := &Configuration{}
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("scheduler config: %w", err)
		}
		if err := yaml.UnmarshalStrict(b, cfg); err != nil {
			return nil, fmt.Errorf("scheduler config %s: %w", path, err)
		}
	}
	if err := Complete(cfg); err != nil {
		if path != "" {
			return nil, fmt.Errorf("scheduler config %s: %w", path, err)
		}
		return nil, fmt.Errorf("scheduler config: %w", err)
	}
	return cfg, nil
}

// argsTypes are the plugin argument types by plugin name.
var argsTypes = map[string]func() runtime.Object{
	plugins.NodeResourcesFitName:           func() runtime.Object { return &configv1.NodeResourcesFitArgs{} },
	plugins.NodeResourcesBalancedAllocName: func() runtime.Object { return &configv1.NodeResourcesBalancedAllocationArgs{} },
	plugins.NodeAffinityName:               func() runtime.Object { return &configv1.NodeAffinityArgs{} },
	plugins.InterPodAffinityName:           func() runtime.Object { return &configv1.InterPodAffinityArgs{} },
	plugins.PodTopologySpreadName:          func() runtime.Object { return &configv1.PodTopologySpreadArgs{} },
	plugins.DefaultPreemptionName:          func() runtime.Object { return &configv1.DefaultPreemptionArgs{} },
}

// Complete defaults and validates a configuration, decoding plugin arguments into their types and building
// every profile once to surface plugin argument errors.
func Complete(cfg *Configuration) error {
	var errs field.ErrorList
	if cfg.PercentageOfNodesToScore == nil {
		cfg.PercentageOfNodesToScore = ptr(int32(0))
	} else if p := *cfg.PercentageOfNodesToScore; p < 0 || p > 100 {
		errs = append(errs, field.Invalid(field.NewPath("percentageOfNodesToScore"), p, "not in valid range [0-100]"))
	}
	if cfg.Parallelism == nil {
		cfg.Parallelism = ptr(int32(16))
	} else if *cfg.Parallelism <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("parallelism"), *cfg.Parallelism, "should be an integer value greater than zero"))
	}
	if cfg.PodInitialBackoffSeconds == nil {
		cfg.PodInitialBackoffSeconds = ptr(int64(1))
	} else if *cfg.PodInitialBackoffSeconds <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("podInitialBackoffSeconds"), *cfg.PodInitialBackoffSeconds, "must be greater than 0"))
	}
	if cfg.PodMaxBackoffSeconds == nil {
		cfg.PodMaxBackoffSeconds = ptr(int64(10))
	} else if *cfg.PodMaxBackoffSeconds < *cfg.PodInitialBackoffSeconds {
		errs = append(errs, field.Invalid(field.NewPath("podMaxBackoffSeconds"), *cfg.PodMaxBackoffSeconds, "must be greater than or equal to PodInitialBackoffSeconds"))
	}
	if len(cfg.Extenders) > 0 {
		errs = append(errs, field.Forbidden(field.NewPath("extenders"), "scheduler extenders are not supported"))
	}
	if len(cfg.Profiles) == 0 {
		cfg.Profiles = []configv1.KubeSchedulerProfile{{}}
	}
	names := map[string]bool{}
	registry := plugins.Registry()
	for i := range cfg.Profiles {
		p := &cfg.Profiles[i]
		path := field.NewPath("profiles").Index(i)
		if p.SchedulerName == nil || *p.SchedulerName == "" {
			if len(cfg.Profiles) == 1 {
				p.SchedulerName = ptr(DefaultSchedulerName)
			} else {
				errs = append(errs, field.Required(path.Child("schedulerName"), ""))
				continue
			}
		}
		if names[*p.SchedulerName] {
			errs = append(errs, field.Duplicate(path.Child("schedulerName"), *p.SchedulerName))
		}
		names[*p.SchedulerName] = true
		if pp := p.PercentageOfNodesToScore; pp != nil && (*pp < 0 || *pp > 100) {
			errs = append(errs, field.Invalid(path.Child("percentageOfNodesToScore"), *pp, "not in valid range [0-100]"))
		}
		errs = append(errs, validatePlugins(p.Plugins, path.Child("plugins"), registry)...)
		seen := map[string]bool{}
		for j := range p.PluginConfig {
			pc := &p.PluginConfig[j]
			pcPath := path.Child("pluginConfig").Index(j)
			if seen[pc.Name] {
				errs = append(errs, field.Duplicate(pcPath.Child("name"), pc.Name))
			}
			seen[pc.Name] = true
			mk, ok := argsTypes[pc.Name]
			if !ok {
				if _, known := registry[pc.Name]; known || slices.Contains(builtinPlugins, pc.Name) {
					errs = append(errs, field.Invalid(pcPath.Child("args"), pc.Name, "this plugin takes no arguments"))
				} else {
					errs = append(errs, field.NotSupported(pcPath.Child("name"), pc.Name, slices.Sorted(mapKeys(argsTypes))))
				}
				continue
			}
			obj := mk()
			if len(pc.Args.Raw) > 0 {
				dec := json.NewDecoder(bytes.NewReader(pc.Args.Raw))
				dec.DisallowUnknownFields()
				if err := dec.Decode(obj); err != nil {
					errs = append(errs, field.Invalid(pcPath.Child("args"), string(pc.Args.Raw), err.Error()))
					continue
				}
			}
			pc.Args.Object = obj
		}
	}
	if len(errs) > 0 {
		return errs.ToAggregate()
	}
	// Build each profile once: plugin constructors check their arguments.
	for i := range cfg.Profiles {
		if _, err := newFramework(&cfg.Profiles[i], cfg, nil); err != nil {
			return fmt.Errorf("profiles[%d]: %w", i, err)
		}
	}
	return nil
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func validatePlugins(ps *configv1.Plugins, path *field.Path, registry map[string]plugins.Factory) field.ErrorList {
	if ps == nil {
		return nil
	}
	var errs field.ErrorList
	sets := map[string]configv1.PluginSet{"multiPoint": ps.MultiPoint, "preFilter": ps.PreFilter, "filter": ps.Filter,
		"postFilter": ps.PostFilter, "preScore": ps.PreScore, "score": ps.Score, "queueSort": ps.QueueSort, "bind": ps.Bind,
		"reserve": ps.Reserve, "permit": ps.Permit, "preBind": ps.PreBind, "postBind": ps.PostBind, "preEnqueue": ps.PreEnqueue}
	for _, point := range slices.Sorted(mapKeys(sets)) {
		set := sets[point]
		for k, list := range map[string][]configv1.Plugin{"enabled": set.Enabled, "disabled": set.Disabled} {
			for j, p := range list {
				at := path.Child(point, k).Index(j)
				if p.Name == "*" && k == "disabled" {
					continue
				}
				if _, ok := registry[p.Name]; !ok && !slices.Contains(builtinPlugins, p.Name) {
					errs = append(errs, field.NotSupported(at.Child("name"), p.Name, slices.Sorted(mapKeys(registry))))
				}
				if p.Weight != nil && (*p.Weight < 0 || *p.Weight > 100) {
					errs = append(errs, field.Invalid(at.Child("weight"), *p.Weight, "must be in the range [0, 100]"))
				}
			}
		}
	}
	return errs
}

// newFramework builds a profile's framework: the default plugins (unless multiPoint disables them), the
// multiPoint and per-point enabled ones, minus the per-point disabled ones; weights from the most specific
// place (score, then multiPoint, then the defaults).
func newFramework(p *configv1.KubeSchedulerProfile, cfg *Configuration, cs framework.ClusterSource) (*framework.Framework, error) {
	registry := plugins.Registry()
	ps := p.Plugins
	if ps == nil {
		ps = &configv1.Plugins{}
	}
	disabledAll := func(set configv1.PluginSet, name string) bool {
		return slices.ContainsFunc(set.Disabled, func(d configv1.Plugin) bool { return d.Name == "*" || d.Name == name })
	}
	// The multiPoint list: defaults not disabled, then enabled ones (replacing a default's weight).
	var multi []configv1.Plugin
	for _, d := range defaultPlugins {
		if !disabledAll(ps.MultiPoint, d.Name) {
			multi = append(multi, d)
		}
	}
	for _, e := range ps.MultiPoint.Enabled {
		if i := slices.IndexFunc(multi, func(m configv1.Plugin) bool { return m.Name == e.Name }); i >= 0 {
			if e.Weight != nil {
				multi[i].Weight = e.Weight
			}
			continue
		}
		multi = append(multi, e)
	}
	args := map[string]runtime.Object{}
	for _, pc := range p.PluginConfig {
		args[pc.Name] = pc.Args.Object
	}
	fw := &framework.Framework{ProfileName: *p.SchedulerName, Parallelism: int(*cfg.Parallelism), Cluster: cs}
	instances := map[string]framework.Plugin{}
	instance := func(name string) (framework.Plugin, error) {
		if pl, ok := instances[name]; ok {
			return pl, nil
		}
		f, ok := registry[name]
		if !ok {
			return nil, nil // a built-in name with nothing to run
		}
		pl, err := f(args[name], fw)
		if err != nil {
			return nil, fmt.Errorf("plugin %s: %w", name, err)
		}
		instances[name] = pl
		return pl, nil
	}
	// at lists the plugins of one extension point: multiPoint ones not disabled there, plus those enabled there.
	at := func(set configv1.PluginSet) ([]configv1.Plugin, error) {
		var out []configv1.Plugin
		for _, m := range multi {
			if !disabledAll(set, m.Name) {
				out = append(out, m)
			}
		}
		for _, e := range set.Enabled {
			if i := slices.IndexFunc(out, func(m configv1.Plugin) bool { return m.Name == e.Name }); i >= 0 {
				if e.Weight != nil {
					out[i].Weight = e.Weight
				}
				continue
			}
			out = append(out, e)
		}
		return out, nil
	}
	var all []framework.Plugin
	add := func(set configv1.PluginSet, fn func(pl framework.Plugin, weight int64) bool) error {
		list, _ := at(set)
		for _, c := range list {
			pl, err := instance(c.Name)
			if err != nil {
				return err
			}
			if pl == nil {
				continue
			}
			w := int64(1)
			if c.Weight != nil && *c.Weight > 0 {
				w = int64(*c.Weight)
			}
			if fn(pl, w) && !slices.Contains(all, pl) {
				all = append(all, pl)
			}
		}
		return nil
	}
	steps := []struct {
		set configv1.PluginSet
		fn  func(framework.Plugin, int64) bool
	}{
		{ps.PreFilter, func(pl framework.Plugin, _ int64) bool {
			x, ok := pl.(framework.PreFilterPlugin)
			if ok {
				fw.PreFilter = append(fw.PreFilter, x)
			}
			return ok
		}},
		{ps.Filter, func(pl framework.Plugin, _ int64) bool {
			x, ok := pl.(framework.FilterPlugin)
			if ok {
				fw.Filter = append(fw.Filter, x)
			}
			return ok
		}},
		{ps.PostFilter, func(pl framework.Plugin, _ int64) bool {
			x, ok := pl.(framework.PostFilterPlugin)
			if ok {
				fw.PostFilter = append(fw.PostFilter, x)
			}
			return ok
		}},
		{ps.PreScore, func(pl framework.Plugin, _ int64) bool {
			x, ok := pl.(framework.PreScorePlugin)
			if ok {
				fw.PreScore = append(fw.PreScore, x)
			}
			return ok
		}},
		{ps.Score, func(pl framework.Plugin, w int64) bool {
			x, ok := pl.(framework.ScorePlugin)
			if ok {
				fw.Score = append(fw.Score, framework.WeightedScore{Plugin: x, Weight: w})
			}
			return ok
		}},
	}
	for _, s := range steps {
		if err := add(s.set, s.fn); err != nil {
			return nil, err
		}
	}
	fw.RegisterEvents(all)
	return fw, nil
}
