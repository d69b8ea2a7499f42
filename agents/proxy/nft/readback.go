package nft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/wheelhouse-dev/wheelhouse/agents/proxy"
)

// image is what the table holds, as far as the backend checks it: every chain's rules (by comment, in order), the
// elements of the virtual-services map (key → chain), of the endpoints map (key → endpoint) and of the hairpin
// set, and which named sets exist. A rule deleted, added or replaced by hand, a chain or an element gone or
// changed, or a missing table all show.
type image struct {
	chains    map[string][]string
	services  map[string]string
	endpoints map[string]string
	hairpin   map[string]bool
	sets      map[string]bool
}

func newImage() image {
	return image{chains: map[string][]string{}, services: map[string]string{}, endpoints: map[string]string{},
		hairpin: map[string]bool{}, sets: map[string]bool{}}
}

// expectedImage is the image of the table holding p.
func expectedImage(cfg Config, p proxy.Programmed) image {
	img := newImage()
	for _, s := range sets {
		img.sets[s.name] = true
	}
	for _, c := range skeleton(cfg) {
		img.chains[c.name] = comments(c.rules)
	}
	for k, ps := range p {
		c := serviceChain(cfg, ps.VirtualService)
		img.chains[c.name] = comments(c.rules)
		img.services[string(servicesKey(k))] = c.name
		for _, e := range endpointElems(ps.VirtualService) {
			img.endpoints[string(e.key)] = string(e.data)
		}
		for _, d := range ps.Destinations {
			img.hairpin[string(hairpinKey(d.Addr()))] = true
		}
	}
	return img
}

func comments(rules []rule) []string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = r.comment
	}
	return out
}

// difference describes the first difference between two images ("" when there is none), for the log.
func (img image) difference(want image) string {
	if !maps.Equal(img.sets, want.sets) {
		return fmt.Sprintf("sets %v, want %v", sorted(img.sets), sorted(want.sets))
	}
	for _, name := range sortedKeys(want.chains) {
		if got, ok := img.chains[name]; !ok {
			return "chain " + name + " is missing or empty"
		} else if !slices.Equal(got, want.chains[name]) {
			return fmt.Sprintf("chain %s has rules %q, want %q", name, got, want.chains[name])
		}
	}
	for _, name := range sortedKeys(img.chains) {
		if _, ok := want.chains[name]; !ok {
			return "unknown chain " + name
		}
	}
	if !maps.Equal(img.services, want.services) {
		return fmt.Sprintf("the %s map has %d elements (want %d) or some go elsewhere", setServices.name, len(img.services), len(want.services))
	}
	if !maps.Equal(img.endpoints, want.endpoints) {
		return fmt.Sprintf("the %s map has %d elements (want %d) or some go elsewhere", setEndpoints.name, len(img.endpoints), len(want.endpoints))
	}
	if !maps.Equal(img.hairpin, want.hairpin) {
		return fmt.Sprintf("the %s set has %d elements, want %d", setHairpin.name, len(img.hairpin), len(want.hairpin))
	}
	return ""
}

// readImage reads the table's image back from the kernel: one dump of its rules, one of each set's elements.
func (s *sock) readImage(table string) (image, error) {
	img := newImage()
	rules, err := s.readRules(table)
	if err != nil {
		return img, err
	}
	for _, r := range rules {
		img.chains[r.chain] = append(img.chains[r.chain], r.comment)
	}
	for _, set := range []setDef{setServices, setEndpoints, setHairpin} {
		err := s.readElems(table, set.name, func(key []byte, chain string, value []byte) {
			switch set.name {
			case setServices.name:
				img.services[string(key)] = chain
			case setEndpoints.name:
				img.endpoints[string(key)] = string(value)
			default:
				img.hairpin[string(key)] = true
			}
		})
		if errors.Is(err, unix.ENOENT) {
			continue
		} else if err != nil {
			return img, err
		}
		img.sets[set.name] = true
	}
	_, err = s.get(unix.NFT_MSG_GETSET, family, attrs(nil).str(unix.NFTA_SET_TABLE, table).str(unix.NFTA_SET_NAME, setAffinity.name))
	if err == nil {
		img.sets[setAffinity.name] = true
	} else if !errors.Is(err, unix.ENOENT) {
		return img, fmt.Errorf("nft: read set %s: %w", setAffinity.name, err)
	}
	return img, nil
}

// ruleInfo is a rule as read back.
type ruleInfo struct {
	chain   string
	handle  uint64
	comment string
}

// readRules dumps the table's rules (none when the table does not exist), in chain order.
func (s *sock) readRules(table string) ([]ruleInfo, error) {
	var out []ruleInfo
	err := s.dump(unix.NFT_MSG_GETRULE, family, attrs(nil).str(unix.NFTA_RULE_TABLE, table), func(a []byte) error {
		var r ruleInfo
		var tbl string
		err := parseAttrs(a, func(typ uint16, v []byte) {
			switch typ {
			case unix.NFTA_RULE_TABLE:
				tbl = cstring(v)
			case unix.NFTA_RULE_CHAIN:
				r.chain = cstring(v)
			case unix.NFTA_RULE_HANDLE:
				if len(v) == 8 {
					r.handle = binary.BigEndian.Uint64(v)
				}
			case unix.NFTA_RULE_USERDATA:
				r.comment = commentOf(v)
			}
		})
		if tbl == table {
			out = append(out, r)
		}
		return err
	})
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("nft: read the rules of table %s: %w", table, err)
	}
	return out, nil
}

// readElems dumps a set's elements: the key and, for a verdict map, the chain of a goto or jump, for a map of
// values the value.
func (s *sock) readElems(table, set string, fn func(key []byte, chain string, value []byte)) error {
	req := attrs(nil).str(unix.NFTA_SET_ELEM_LIST_TABLE, table).str(unix.NFTA_SET_ELEM_LIST_SET, set)
	err := s.dump(unix.NFT_MSG_GETSETELEM, family, req, func(a []byte) error {
		return parseAttrs(a, func(typ uint16, v []byte) {
			if typ != unix.NFTA_SET_ELEM_LIST_ELEMENTS {
				return
			}
			_ = parseAttrs(v, func(_ uint16, e []byte) {
				var key, value []byte
				var chain string
				_ = parseAttrs(e, func(typ uint16, v []byte) {
					switch typ {
					case unix.NFTA_SET_ELEM_KEY:
						_ = parseAttrs(v, func(typ uint16, v []byte) {
							if typ == unix.NFTA_DATA_VALUE {
								key = slices.Clone(v)
							}
						})
					case unix.NFTA_SET_ELEM_DATA:
						chain, value = verdictChain(v), dataValue(v)
					}
				})
				fn(key, chain, value)
			})
		})
	})
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("nft: read set %s: %w", set, err)
	}
	return err
}

func verdictChain(data []byte) string {
	var chain string
	_ = parseAttrs(data, func(typ uint16, v []byte) {
		if typ == unix.NFTA_DATA_VERDICT {
			_ = parseAttrs(v, func(typ uint16, v []byte) {
				if typ == unix.NFTA_VERDICT_CHAIN {
					chain = cstring(v)
				}
			})
		}
	})
	return chain
}

func dataValue(data []byte) []byte {
	var value []byte
	_ = parseAttrs(data, func(typ uint16, v []byte) {
		if typ == unix.NFTA_DATA_VALUE {
			value = slices.Clone(v)
		}
	})
	return value
}

// hairpinCounts counts, for each endpoint address of p's active destinations, the virtual services that have it.
func hairpinCounts(p proxy.Programmed) map[netip.Addr]int {
	out := map[netip.Addr]int{}
	for _, ps := range p {
		for _, d := range ps.Destinations {
			out[d.Addr()]++
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := slices.Collect(maps.Keys(m))
	sort.Strings(out)
	return out
}

func sorted(m map[string]bool) []string { return sortedKeys(m) }
