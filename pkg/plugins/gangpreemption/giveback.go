package gangpreemption

// giveBack decides which of n victim units, in order, are given back (spared): unit i is
// spared when the gang still fits with it and every unit spared before it back on its
// nodes, as kube-scheduler reprieves victims one at a time. tryBatch(lo, hi) gives back
// units [lo, hi) and keeps them when the gang still fits, or takes them off again and
// reports false. It returns the units that stay victims, in order.
//
// With batches (the planner decides, a run over the whole domain), units are tried in runs
// that double while they fit and halve when they do not: the planner runs about log n times
// per victim instead of once per unit. Fitting with fewer units given back follows from
// fitting with more (more room), so the victims are those of one unit at a time; a planner
// that breaks that rule still ends on a state it planned.
func giveBack(n int, batches bool, tryBatch func(lo, hi int) bool) []int {
	var victims []int
	step, capped := 1, false
	for i := 0; i < n; {
		hi := min(i+step, n)
		if tryBatch(i, hi) {
			i = hi
			if batches && !capped {
				step *= 2
			}
			continue
		}
		if hi-i == 1 {
			victims = append(victims, i)
			i++
			step, capped = 1, false
			continue
		}
		// The run holds a unit that does not fit: halve it until that unit is alone.
		step, capped = (hi-i)/2, true
	}
	return victims
}
