/// How much work each stage of a run does.
///
/// `full` gives the figures the goals are judged by; `quick` is a shorter look at the same
/// stages; `smoke` is for the test command, which checks that every stage still runs to the end
/// and reads none of its figures, so each stage does the least that still exercises its path.
enum Scale: Sendable {
    case full, quick, smoke

    /// The scale the command line asks for: `--smoke` wins over `--quick`.
    init(arguments: [String]) {
        if arguments.contains("--smoke") {
            self = .smoke
        } else if arguments.contains("--quick") {
            self = .quick
        } else {
            self = .full
        }
    }

    /// The value of this scale among the three.
    func pick<Value>(_ full: Value, quick: Value, smoke: Value) -> Value {
        switch self {
        case .full: full
        case .quick: quick
        case .smoke: smoke
        }
    }
}
