package source

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// MaxNameLength bounds discovered HyperNode names: object names may be 253 characters, but
// names that fit a terminal column and a label value are easier to use.
const MaxNameLength = 63

// hashLength is the number of hex digits of the hash suffix (40 bits).
const hashLength = 10

// Name returns the HyperNode name of a path: prefix (a DNS label chosen by the source, such as
// the topology type) and the path's components from the top down, joined by dots:
// "fabric.core-0.spine-1.leaf-3". When a component is not a DNS label (upper case, dots,
// underscores, empty, too long) or the name would exceed MaxNameLength, the name is the
// prefix, the last component made valid, and a hash of the whole path:
// "fabric.leaf-3-1f0c9a2b7e". Equal paths give equal names; different paths give different
// names: the hash covers every component, length-prefixed so that no two lists hash alike
// (a plain name and a hashed one could only meet by a 40-bit hash collision).
func Name(prefix string, components ...string) string {
	plain := len(components) > 0
	for _, c := range components {
		if len(validation.IsDNS1123Label(c)) > 0 {
			plain = false
			break
		}
	}
	if plain {
		if name := prefix + "." + strings.Join(components, "."); len(name) <= MaxNameLength {
			return name
		}
	}
	// Each part is written with its length, so that no two lists of parts hash alike.
	h := sha256.New()
	for _, part := range append([]string{prefix}, components...) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	suffix := "-" + hex.EncodeToString(h.Sum(nil))[:hashLength]
	last := "x"
	if len(components) > 0 {
		last = Sanitize(components[len(components)-1])
	}
	base := prefix + "." + last
	if room := MaxNameLength - len(suffix); len(base) > room {
		base = strings.TrimRight(base[:room], "-.")
	}
	return base + suffix
}

// Sanitize turns s into a DNS label as readable as possible: lower case, every other
// character a dash, no leading, trailing or repeated dashes, at most 63 characters; "x" when
// nothing is left.
func Sanitize(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
			continue
		}
		if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	out := strings.TrimRight(b.String(), "-")
	if len(out) > validation.DNS1123LabelMaxLength {
		out = strings.TrimRight(out[:validation.DNS1123LabelMaxLength], "-")
	}
	if out == "" {
		return "x"
	}
	return out
}
