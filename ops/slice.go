package ops

import "fmt"

// slice cuts columns out of each row, as a fused projection (Falcon's
// query_key_value) needs. Graph parameters have no arithmetic, so besides a
// column range [start, start+len) the op can take one of `parts` equal pieces
// of that range: Falcon's k and v are the two halves of what follows q.
func init() {
	Register(&Op{Name: "slice",
		Doc:    "columns [start, start+len) of each row (len -1: to the end), then piece `part` of `parts` equal pieces of those",
		Inputs: 1,
		Attrs: []AttrSpec{{Name: "start", Kind: Int, Default: 0}, {Name: "len", Kind: Int, Default: -1},
			{Name: "parts", Kind: Int, Default: 1}, {Name: "part", Kind: Int, Default: 0}},
		Shape: func(s *ShapeArgs) (int, error) {
			_, n, err := sliceRange(s.In[0], s.A)
			return n, err
		},
		Run: func(c *Ctx) error {
			lo, n, err := sliceRange(c.In[0].Cols, c.A)
			if err != nil {
				return err
			}
			for t := 0; t < c.Out.Rows; t++ {
				copy(c.Out.Row(t), c.In[0].Row(t)[lo:lo+n])
			}
			return nil
		}})
}

// sliceRange returns the first column and the width of the slice of a row
// of width cols.
func sliceRange(cols int, a Attrs) (lo, n int, err error) {
	start, length, parts, part := a.Int("start"), a.Int("len"), a.Int("parts"), a.Int("part")
	if start < 0 || start >= cols {
		return 0, 0, fmt.Errorf("start %d is outside the input's %d columns", start, cols)
	}
	if length == -1 {
		length = cols - start
	}
	if length <= 0 || start+length > cols {
		return 0, 0, fmt.Errorf("columns [%d, %d+%d) do not fit the input's %d columns", start, start, length, cols)
	}
	if parts < 1 || part < 0 || part >= parts {
		return 0, 0, fmt.Errorf("part %d of %d: want 0 <= part < parts", part, parts)
	}
	if length%parts != 0 {
		return 0, 0, fmt.Errorf("%d columns do not split into %d equal parts", length, parts)
	}
	n = length / parts
	return start + part*n, n, nil
}
