// Package boot models the kernel's boot progress (include/linux/kernel.h:
// enum system_states, init/main.c:system_state): the reservation checks
// treat init-text sites differently before SYSTEM_RUNNING, core_kernel_text
// accepts init text only before SYSTEM_FREEING_INITMEM, and the proposed
// address indexes are built at late init.
package boot

import "fmt"

// State is enum system_states, in the kernel's order.
type State int

const (
	Booting        State = iota // SYSTEM_BOOTING
	Scheduling                  // SYSTEM_SCHEDULING
	FreeingInitmem              // SYSTEM_FREEING_INITMEM
	Running                     // SYSTEM_RUNNING
	Halt                        // SYSTEM_HALT
	PowerOff                    // SYSTEM_POWER_OFF
	Restart                     // SYSTEM_RESTART
	Suspend                     // SYSTEM_SUSPEND
)

var names = [...]string{"SYSTEM_BOOTING", "SYSTEM_SCHEDULING", "SYSTEM_FREEING_INITMEM", "SYSTEM_RUNNING",
	"SYSTEM_HALT", "SYSTEM_POWER_OFF", "SYSTEM_RESTART", "SYSTEM_SUSPEND"}

func (s State) String() string {
	if s >= 0 && int(s) < len(names) {
		return names[s]
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// InitSitesCount reports whether init-text jump-label and static-call
// sites still count as reserved: init = (system_state < SYSTEM_RUNNING) in
// kernel/jump_label.c:jump_label_text_reserved and
// kernel/static_call_inline.c:static_call_text_reserved.
func (s State) InitSitesCount() bool { return s < Running }

// InitTextIsCore reports whether core_kernel_text still accepts init text
// (kernel/extable.c:core_kernel_text: system_state < SYSTEM_FREEING_INITMEM).
func (s State) InitTextIsCore() bool { return s < FreeingInitmem }
