#if canImport(Glibc)
import Glibc
#endif

/// The scheduling priority of the calling thread. Linux schedules each thread as a task of its
/// own with its own nice value, and `setpriority(PRIO_PROCESS, 0, …)` names the calling task: it
/// touches no other thread of the process (see setpriority(2), "Bugs").
enum ThreadPriority {
    /// Raises the calling thread's nice value to `nice` unless it is there already. Lowering a
    /// priority needs no privilege; raising one back would, so only dedicated threads call this.
    static func lowerCurrentThread(to nice: Int32) {
        #if os(Linux)
        let which = __priority_which_t(PRIO_PROCESS.rawValue)
        if getpriority(which, 0) < nice { _ = setpriority(which, 0, nice) }
        #endif
    }
}
