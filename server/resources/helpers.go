package resources

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation"
)

// nameColumn is every table's first column.
var nameColumn = metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name",
	Description: "Name must be unique within a namespace. More info: " +
		"https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"}

// ageColumn is the usual last column.
var ageColumn = metav1.TableColumnDefinition{Name: "Age", Type: "string",
	Description: "CreationTimestamp is a timestamp representing the server time when this object was created."}

// age formats the time since t the way kubectl does ("5m", "3d"), "<unknown>" for a zero time.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// ValidateDNSLabelName is a NameValidation for names that must be DNS-1123 labels (namespaces, services).
func ValidateDNSLabelName(name string, prefix bool) []string {
	if prefix {
		name = maskTrailingDash(name)
	}
	return validation.IsDNS1123Label(name)
}

// ValidateDNSSubdomainName is the default NameValidation.
func ValidateDNSSubdomainName(name string, prefix bool) []string {
	if prefix {
		name = maskTrailingDash(name)
	}
	return validation.IsDNS1123Subdomain(name)
}

// maskTrailingDash lets a generateName prefix end in "-", as the random suffix follows it.
func maskTrailingDash(name string) string {
	if len(name) > 1 && name[len(name)-1] == '-' {
		return name[:len(name)-2] + "a"
	}
	return name
}
