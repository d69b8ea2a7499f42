package rbac

import "testing"

func TestPlatformRoles(t *testing.T) {
	p, err := NewPlatform()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		role, obj, act string
		want           bool
	}{
		{"viewer", ObjClusters, ActRead, true},
		{"viewer", ObjClusters, ActWrite, false},
		{"viewer", ObjKubeconfig, ActCreate, true},
		{"member", ObjMembers, ActRead, true},
		{"member", ObjMembers, ActWrite, false},
		{"member", ObjJoinTokens, ActWrite, false},
		{"member", ObjAudit, ActRead, false},
		{"admin", ObjMembers, ActWrite, true},
		{"admin", ObjClusters, ActDelete, true},
		{"admin", ObjAudit, ActRead, true},
		{"admin", ObjTeam, ActDelete, false},
		{"admin", ObjTeam, ActTransfer, false},
		{"owner", ObjTeam, ActDelete, true},
		{"owner", ObjTeam, ActTransfer, true},
		{"owner", ObjClusters, ActRead, true},
		{"", ObjClusters, ActRead, false},
		{"stranger", ObjClusters, ActRead, false},
	} {
		if got := p.Allowed(tc.role, tc.obj, tc.act); got != tc.want {
			t.Errorf("%s %s %s = %v, want %v", tc.role, tc.act, tc.obj, got, tc.want)
		}
	}
}
