package store

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Key names one object.
type Key struct {
	Cluster   string
	Resource  string // plural resource with its group, for example "pods" or "deployments.apps"
	Namespace string // empty for cluster-scoped resources
	Name      string
}

func (k Key) String() string {
	if k.Namespace == "" {
		return fmt.Sprintf("%s/%s/%s", k.Cluster, k.Resource, k.Name)
	}
	return fmt.Sprintf("%s/%s/%s/%s", k.Cluster, k.Resource, k.Namespace, k.Name)
}

// MaxKeyPart is the most bytes a part of a Key may have.
const MaxKeyPart = 1024

// ValidKeyPart reports whether s may be a part of a Key (cluster, resource, namespace or name): valid UTF-8
// without NUL (PostgreSQL text holds neither), at most MaxKeyPart bytes. The store refuses anything else with
// ErrInvalid; callers that take names from users check first, to answer "no such object" or "invalid name".
func ValidKeyPart(s string) bool {
	return len(s) <= MaxKeyPart && utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

func (k Key) validate() error {
	if k.Cluster == "" || k.Resource == "" || k.Name == "" {
		return fmt.Errorf("key %q: cluster, resource and name are required: %w", k, ErrInvalid)
	}
	for _, part := range []string{k.Cluster, k.Resource, k.Namespace, k.Name} {
		if !ValidKeyPart(part) {
			return fmt.Errorf("key %q: parts must be valid UTF-8 without NUL, at most 1024 bytes: %w", k, ErrInvalid)
		}
	}
	return nil
}

// Object is one stored version of a key.
type Object struct {
	Key
	// Revision is the revision of the write that produced this version (for a deleted object: of the delete).
	Revision int64
	// CreateRevision is the revision that created the key (it changes when a key is deleted and re-created).
	CreateRevision int64
	Value          []byte
}

// EventType says what happened to an object.
type EventType int

const (
	Added EventType = iota + 1
	Modified
	Deleted
	// Bookmark carries no object: Revision says every event up to it has been delivered.
	Bookmark
)

func (t EventType) String() string {
	switch t {
	case Added:
		return "ADDED"
	case Modified:
		return "MODIFIED"
	case Deleted:
		return "DELETED"
	case Bookmark:
		return "BOOKMARK"
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

// Event is one change, or a bookmark.
type Event struct {
	Type EventType
	// Object is the new state (ADDED, MODIFIED) or the last state (DELETED); its Revision is the event's.
	// For a BOOKMARK only Object.Revision is set.
	Object Object
	// PrevRevision is the revision of the version this event replaced (0 for ADDED and BOOKMARK).
	PrevRevision int64
}

// Revision is the event's revision.
func (e Event) Revision() int64 { return e.Object.Revision }
