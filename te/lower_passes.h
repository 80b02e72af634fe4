// Declares the lowering passes (one per file) that te/lower.cc runs in order.
#pragma once

#include <vector>

#include "te/ir.h"
#include "te/schedule.h"

namespace ktune::te {

struct PaddingGuards;  // te/lower_padding_guards.h

// Schedule -> loop nests with Realize/BufferLoad/BufferStore: inlining, bounds inference for
// compute_at stages, split/fuse index reconstruction with guards, reduction init/update.
// Fills *args (one BufferArg per tensor of `tensors`, in order). Throws ktune::Error
// (kInvalidSchedule) for an invalid schedule, (kInvalidArgument) when a placeholder that is
// read is missing from `tensors`.
Stmt schedule_ops(const Schedule& sched, const std::vector<Tensor>& tensors,
                  std::vector<BufferArg>* args);

// Realize -> Allocate, BufferLoad/BufferStore -> flat row-major Load/Store.
Stmt storage_flatten(const Stmt& s, const std::vector<BufferArg>& args);

// Replaces each loop nest that a stage tensorized (Stage::tensorize) by its intrinsic's statement,
// after checking that the nest computes the intrinsic's update: loop extents, the strides of every
// read and of the store, dtypes. The reduction's init nest (a constant store) stays. A factor
// read select(c, x, 0) with c the same for the whole nest (an inlined zero padding) is read as x
// under if (c): the taps of the padding are skipped, and c is recorded in `guards` for
// unswitch_padding_guards. Throws ktune::Error(kInvalidSchedule) saying what differs, or that the
// loop is gone.
Stmt tensorize(const Stmt& s, const Schedule& sched, PaddingGuards& guards);

// The skip_padding_taps pass, in two steps (te/lower_skip_padding_taps.cc).
// 1. Turns each reduction update over a bounds Select that makes it a no-op (an inlined padding:
//    acc + select(c, x, 0) * w, max(acc, select(c, x, lowest))) into a guarded update that skips
//    the padding taps. Conditions on a vectorized loop's variable stay Selects. Records the guards
//    in `guards`.
Stmt guard_padding_taps(const Stmt& s, PaddingGuards& guards);
// 2. Unswitches each accumulation nest on the guards recorded in `guards` (step 1's and
//    tensorize's) so that its interior iterations run without them; the guards it leaves stay
//    recorded (none recorded: s unchanged).
Stmt unswitch_padding_guards(const Stmt& s, PaddingGuards& guards);

// Cuts each border nest that unswitch_padding_guards left guarded (its guards depend only on the
// enclosing loops and on the unrolled copies of a register tile inside it) into a chain of
// unguarded versions, one per interval of copies that a tap reaches. Runs on
// unswitch_padding_guards' output, before anything rebuilds its expressions (the guards are known
// by node identity).
Stmt cut_border_tiles(const Stmt& s, PaddingGuards& guards);

// Clamps the index of every Load under a Select operand that is not provably in bounds, so that
// eager evaluation of both operands never reads out of bounds.
Stmt clamp_select_loads(const Stmt& s, const std::vector<BufferArg>& args);

// Peels the last iteration off a loop when that is the only iteration where some guard inside can
// fail (the tail of a non-dividing split): the main loop loses the guard. Nested up to 3 deep.
Stmt partition_loops(const Stmt& s);

// Replaces each kUnrolled For (constant extent) by copies of its body.
Stmt unroll_loops(const Stmt& s);

// Replaces each kVectorized For by Ramp/Broadcast vector code, or by a serial loop when the body
// cannot be vectorized (a vector condition, an allocation, a scalar store of vector data).
Stmt vectorize_loops(const Stmt& s);

// Removes statements without effect: empty loops and blocks, unused allocations.
Stmt remove_no_ops(const Stmt& s);

}  // namespace ktune::te
