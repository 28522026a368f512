package hypernode

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// The HyperNode tree as node labels: hypernode-controller (pkg/controller/nodelabels), when
// turned on, gives every node in a usable leaf one label per tier of its chain of HyperNodes,
// TierLabelKey(tier) = TierLabelValue(name of the node's HyperNode at that tier), so that
// consumers that group nodes by a label key (kube-scheduler's TopologyPlacementGenerator,
// Kueue's Topology levels) see the same tree as this scheduler.
const (
	// TierLabelPrefix starts every tier label key: hypernode.dev/tier-<tier>.
	TierLabelPrefix = "hypernode.dev/tier-"
	// TierLabelsAnnotation records, on a node, the tier label keys hypernode-controller wrote
	// there, comma-separated: a hypernode.dev/tier-N label not listed was written by someone
	// else, and the controller never changes or removes it.
	TierLabelsAnnotation = "hypernode.dev/tier-labels"
)

// tierLabelHashLen is the number of hex digits of the SHA-256 that stand for the cut part of
// a long HyperNode name in a label value.
const tierLabelHashLen = 10

// TierLabelKey is the node label key of a tier: hypernode.dev/tier-<tier> (tier 1 is the
// leaf tier of most trees).
func TierLabelKey(tier int) string {
	return TierLabelPrefix + strconv.Itoa(tier)
}

// ParseTierLabelKey returns the tier of a key TierLabelKey made, and false for any other key
// (another prefix, a negative, signed or zero-padded number: TierLabelKey never writes
// those, so they are not tier labels).
func ParseTierLabelKey(key string) (tier int, ok bool) {
	digits, found := strings.CutPrefix(key, TierLabelPrefix)
	if !found || digits == "" || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	tier, err := strconv.Atoi(digits)
	if err != nil {
		return 0, false
	}
	return tier, true
}

// TierLabelValue maps a HyperNode name to a node label value. A name that is a valid label
// value (every HyperNode name of at most 63 characters: object names are DNS subdomains) is
// the value as is. A longer one is its first 52 characters, with trailing '.' and '-'
// trimmed, then '-' and the first 10 hex digits of the name's SHA-256: at most 63 characters,
// and two names that share their first 52 characters still differ. (Any other invalid input
// has its invalid characters replaced by '-' the same way; the API never yields one.)
func TierLabelValue(hyperNodeName string) string {
	if isLabelValue(hyperNodeName) {
		return hyperNodeName
	}
	sum := sha256.Sum256([]byte(hyperNodeName))
	hash := hex.EncodeToString(sum[:])[:tierLabelHashLen]
	prefix := []byte(hyperNodeName[:min(len(hyperNodeName), validation.LabelValueMaxLength-1-tierLabelHashLen)])
	for i, c := range prefix {
		if !isLabelValueChar(c) {
			prefix[i] = '-'
		}
	}
	trimmed := strings.TrimRight(strings.TrimLeft(string(prefix), "-_."), "-_.")
	if trimmed == "" {
		return hash
	}
	return trimmed + "-" + hash
}

// isLabelValue is validation.IsValidLabelValue without its regular expression: the
// publisher maps every tier of every node on each look.
func isLabelValue(s string) bool {
	if s == "" {
		return true
	}
	if len(s) > validation.LabelValueMaxLength || !isAlphanumeric(s[0]) || !isAlphanumeric(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isLabelValueChar(s[i]) {
			return false
		}
	}
	return true
}

func isAlphanumeric(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isLabelValueChar(c byte) bool {
	return isAlphanumeric(c) || c == '-' || c == '_' || c == '.'
}

// TierLabels returns the tier labels of a node in a snapshot: for the usable leaf that holds
// it and every ancestor up to the virtual root (not included), TierLabelKey(tier) =
// TierLabelValue(name). A node outside every usable leaf has none (nil).
func (s *Snapshot) TierLabels(node string) map[string]string {
	leaf, ok := s.LeafOf(node)
	if !ok {
		return nil
	}
	out := map[string]string{}
	for name := leaf; name != "" && name != VirtualRootName; {
		info, ok := s.HyperNode(name)
		if !ok || info.Excluded || info.Tier < 0 {
			// A usable leaf has usable ancestors, and the API refuses a negative tier (whose
			// key ParseTierLabelKey would not read back); a snapshot that says otherwise gets
			// no labels rather than a partial chain.
			return nil
		}
		out[TierLabelKey(info.Tier)] = TierLabelValue(name)
		name = info.Parent
	}
	return out
}
