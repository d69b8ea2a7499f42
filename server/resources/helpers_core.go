package resources

// Pod specs are one contract shared by Pods and by every workload's pod template (Deployments, Jobs, ...), so their
// defaulting and validation live in their own files: podspec_defaults.go, podspec_validation.go, containers.go,
// container_env.go, scheduling_validation.go (affinity, tolerations, topology spread), resources_validation.go
// (quantities, resource lists) and volumes.go. This file keeps the small generic helpers the core kinds share
// (ports, protocols, sorted keys, ...). pods.go and pods_update.go add what only Pods have: status, QoS class,
// update rules and field selectors.

import (
	"maps"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ptrTo returns a pointer to a copy of v.
func ptrTo[T any](v T) *T { return &v }

// setFields returns the JSON names of s's non-nil pointer fields, in declaration order. s points to a struct of
// one-of members (VolumeSource, ProbeHandler, EnvVarSource, ...).
func setFields(s any) []string {
	v := reflect.ValueOf(s).Elem()
	var out []string
	for i := 0; i < v.NumField(); i++ {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			out = append(out, strings.Split(v.Type().Field(i).Tag.Get("json"), ",")[0])
		}
	}
	return out
}

// invalidEach turns the messages of a validation.IsX check into Invalid errors at p.
func invalidEach(p *field.Path, value any, msgs []string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range msgs {
		errs = append(errs, field.Invalid(p, value, msg))
	}
	return errs
}

// validatePortNumOrName checks an int-or-string port: a number in 1-65535 or an IANA service name.
func validatePortNumOrName(port intstr.IntOrString, p *field.Path) field.ErrorList {
	if port.Type == intstr.String {
		return invalidEach(p, port.StrVal, validation.IsValidPortName(port.StrVal))
	}
	return invalidEach(p, port.IntValue(), validation.IsValidPortNum(port.IntValue()))
}

// validateProtocol accepts TCP, UDP and SCTP.
func validateProtocol(proto corev1.Protocol, p *field.Path) field.ErrorList {
	switch proto {
	case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		return nil
	case "":
		return field.ErrorList{field.Required(p, "")}
	}
	return field.ErrorList{field.NotSupported(p, proto,
		[]corev1.Protocol{corev1.ProtocolSCTP, corev1.ProtocolTCP, corev1.ProtocolUDP})}
}

// sortedKeys returns m's keys in order, so that errors and output are deterministic.
func sortedKeys[K ~string, V any](m map[K]V) []K {
	return slices.Sorted(maps.Keys(m))
}

// requiredString requires a non-empty value at p.
func requiredString(v string, p *field.Path) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	return nil
}
