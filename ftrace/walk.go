package ftrace

// WalkRecords makes every lookup_rec walk the records instead of answering
// repeated questions from the memo (the same answers and counts): the
// walking reference the differential tests compare against
// (machine.Config.Walk).
func (ft *Ftrace) WalkRecords() { ft.recMemo = nil }
