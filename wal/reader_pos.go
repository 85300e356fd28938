package wal

// NextPos returns the position of the record the next call to Next will
// return (after a successful Next: the end of the record just returned, so
// NextPos()-p is that record's framed size).
func (r *Reader) NextPos() Pos { return r.pos }
