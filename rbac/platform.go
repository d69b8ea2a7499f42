package rbac

import (
	"fmt"

	"github.com/casbin/casbin/v2"
	"github.com/casbin/casbin/v2/model"
)

// Platform actions: what a team role may do through the platform API (teams, members, invitations, clusters,
// tokens, join tokens, audit). One Casbin enforcer holds the policy; roles inherit downwards
// (owner ⊃ admin ⊃ member ⊃ viewer).

// Objects of platform actions.
const (
	ObjTeam        = "team"
	ObjMembers     = "members"
	ObjInvitations = "invitations"
	ObjClusters    = "clusters"
	ObjJoinTokens  = "join-tokens"
	ObjAudit       = "audit"
	ObjKubeconfig  = "kubeconfig"
)

// Actions on them.
const (
	ActRead     = "read"
	ActWrite    = "write"
	ActDelete   = "delete"
	ActTransfer = "transfer"
	ActCreate   = "create"
)

const platformModel = `
[request_definition]
r = role, obj, act

[policy_definition]
p = role, obj, act

[role_definition]
g = _, _

[policy_effect]
e = some(where (p.eft == allow))

[matchers]
m = g(r.role, p.role) && r.obj == p.obj && r.act == p.act
`

// platformPolicy: each line is the least role that may do it.
var platformPolicy = [][]string{
	{"viewer", ObjTeam, ActRead},
	{"viewer", ObjMembers, ActRead},
	{"viewer", ObjClusters, ActRead},
	{"viewer", ObjKubeconfig, ActCreate}, // a kubeconfig carries the caller's own token: RBAC decides the rest
	{"admin", ObjTeam, ActWrite},
	{"admin", ObjMembers, ActWrite},
	{"admin", ObjInvitations, ActRead},
	{"admin", ObjInvitations, ActWrite},
	{"admin", ObjClusters, ActWrite},
	{"admin", ObjClusters, ActDelete},
	{"admin", ObjJoinTokens, ActRead},
	{"admin", ObjJoinTokens, ActWrite},
	{"admin", ObjAudit, ActRead},
	{"owner", ObjTeam, ActDelete},
	{"owner", ObjTeam, ActTransfer},
}

var roleInheritance = [][]string{{"owner", "admin"}, {"admin", "member"}, {"member", "viewer"}}

// Platform decides platform actions by team role.
type Platform struct{ e *casbin.Enforcer }

// NewPlatform builds the platform policy.
func NewPlatform() (*Platform, error) {
	m, err := model.NewModelFromString(platformModel)
	if err != nil {
		return nil, fmt.Errorf("rbac: platform model: %w", err)
	}
	e, err := casbin.NewEnforcer(m)
	if err != nil {
		return nil, fmt.Errorf("rbac: platform enforcer: %w", err)
	}
	e.EnableLog(false)
	if _, err := e.AddPolicies(platformPolicy); err != nil {
		return nil, fmt.Errorf("rbac: platform policy: %w", err)
	}
	if _, err := e.AddGroupingPolicies(roleInheritance); err != nil {
		return nil, fmt.Errorf("rbac: platform roles: %w", err)
	}
	return &Platform{e: e}, nil
}

// Allowed reports whether a member with role may do act on obj in their team. An empty role (not a member)
// may do nothing.
func (p *Platform) Allowed(role, obj, act string) bool {
	if role == "" {
		return false
	}
	ok, err := p.e.Enforce(role, obj, act)
	return err == nil && ok
}
