/// The receiving side of signed changes (docs/signed-changes.md, step 3), as a pure function:
/// given what a receiver has verified of each replica's chain, the ranges a delta covers with
/// their signed heads, and the leaves of the changes it carries, which ranges verify and where
/// each replica's verified chain then stands — or why the delta must be refused whole. A range
/// claimed without its rows fails: the counters it leaves out take the "none" leaf
/// (`ChangeLeaf.none`), which is not what the replica signed for a change it made.
///
/// Pure: the signature check and the keys are passed in, so this runs in unit tests and fuzzers
/// exactly as in a session. The caller computes each carried change's leaf (`ChangeLeaf`) and,
/// after merging, checks the stubs' "it lost" claims against its state.
package struct ProvenanceCheck: Sendable {
    /// A delta's claim to complete `(from, through]` of a replica, with the replica's signature of
    /// its head at `through` and, when the range starts at or below it, the replica's latest
    /// genesis at or below `through` (the counters up to a genesis were written unsigned). Only
    /// the signature travels: the receiver computes the head's hash from the leaves, so a head
    /// costs 64 bytes on the wire (a genesis's hash is 32 zero bytes by definition).
    package struct Range: Hashable, Sendable {
        package let replica: ReplicaID
        package let from: UInt64
        package let through: UInt64
        package let signature: [UInt8]
        package let genesis: Genesis?

        package init(replica: ReplicaID, from: UInt64, through: UInt64, signature: [UInt8], genesis: Genesis? = nil) {
            self.replica = replica
            self.from = from
            self.through = through
            self.signature = signature
            self.genesis = genesis
        }
    }

    /// A replica's signed genesis: the counters up to `counter` were written unsigned.
    package struct Genesis: Hashable, Sendable {
        package let counter: UInt64
        package let signature: [UInt8]

        package init(counter: UInt64, signature: [UInt8]) {
            self.counter = counter
            self.signature = signature
        }
    }

    /// Why a delta is refused whole; the session logs it and ends the connection.
    package enum Problem: Error, Equatable, Sendable, CustomStringConvertible {
        /// The range is empty or reversed.
        case emptyRange(ReplicaID, from: UInt64, through: UInt64)
        /// The genesis is above the range's end, or its signature fails.
        case badGenesis(ReplicaID, counter: UInt64)
        /// The range failed the chain check.
        case chain(ReplicaID, ChainVerifier.Problem)
        /// The range asks for more counters without a change than anyone may claim
        /// (`maxCountersWithoutChange`): checking it would cost a hash each.
        case tooManyWithoutChange(ReplicaID, count: UInt64)
        /// The delta carries two changes under one counter of the replica.
        case twoChangesAtOneCounter(ReplicaID, counter: UInt64)

        package var description: String {
            switch self {
            case .emptyRange(let replica, let from, let through):
                "replica \(replica)'s range (\(from), \(through)] is empty"
            case .badGenesis(let replica, let counter):
                "replica \(replica)'s genesis at \(counter) is not one it signed"
            case .chain(let replica, let problem): "replica \(replica): \(problem)"
            case .tooManyWithoutChange(let replica, let count):
                "replica \(replica)'s range leaves \(count) counters without a change (at most \(ProvenanceCheck.maxCountersWithoutChange))"
            case .twoChangesAtOneCounter(let replica, let counter):
                "the delta carries two changes under counter \(counter) of replica \(replica)"
            }
        }
    }

    /// What the check found for one range.
    package enum Verdict: Equatable, Sendable {
        /// Verified: the replica's verified chain now stands at this head.
        case verified(ChainHead)
        /// Already verified up to the range's end: nothing new.
        case known
        /// It starts above what the receiver verified and no genesis bridges the gap: its rows
        /// are not merged (a later delta fills the gap; the version vector asks for that anyway).
        case gap
        /// No record the receiver holds names the replica's signing key yet (the record, or the
        /// member record that pins its device's key, may come in a later delta): like a gap, its
        /// rows are not merged, and the range is asked for again once the key is known.
        case keyUnknown
    }

    /// The most counters of one range that may carry no change (each takes the "none" leaf, one
    /// hash to check): only counters a version-3 peer once claimed without rows do, so an honest
    /// range has few; a hostile one cannot make the receiver hash for long.
    package static let maxCountersWithoutChange: UInt64 = 65_536

    let hasher: ElementHasher
    let signatureIsValid: @Sendable (SignedHead, _ key: [UInt8]) -> Bool

    package init(hasher: ElementHasher, signatureIsValid: @escaping @Sendable (SignedHead, _ key: [UInt8]) -> Bool) {
        self.hasher = hasher
        self.signatureIsValid = signatureIsValid
    }

    /// The head a range's leaves lead to from a given start: the chain's hashes walked over
    /// `(start.counter, through]`. Computed ahead of a merge (`folds`) where the start can be
    /// foreseen, it is looked up by the check instead of walked again.
    package struct Fold: Hashable, Sendable {
        package let start: ChainHead
        package let through: UInt64
    }

    /// Checks every range. `verified`: each replica's verified head (a genesis counts); `keys`:
    /// each replica's signing key; `leaves`: the leaf of each change the delta carries, by dot.
    /// Ranges are checked in order, each from where the previous one left its replica, so a
    /// delta may carry one replica's chain in several ranges.
    package func check(
        _ ranges: [Range],
        verified: [ReplicaID: ChainHead],
        keys: [ReplicaID: [UInt8]],
        leaves: [Dot: [UInt8]]
    ) -> Result<[Verdict], Problem> {
        check(ranges, verified: verified, keys: keys, leaves: ChangeLeaves(leaves))
    }

    /// The heads the ranges' leaves lead to from `starts` (each replica's verified head as it is
    /// expected to be when the delta is merged), each range from where the one before left its
    /// replica: the chain's hashes, the costly part of `check`, worked out beside the merge
    /// before. Signatures and everything else are left to `check`, which uses a fold only where
    /// its start is the head it finds then. A range that could not be folded is left out.
    package func folds(
        _ ranges: [Range],
        starts: [ReplicaID: ChainHead],
        leaves: ChangeLeaves
    ) -> [Fold: ChainHead] {
        var starts = starts
        var folds: [Fold: ChainHead] = [:]
        for range in ranges where range.from < range.through {
            guard let from = Self.start(of: range, after: starts[range.replica]),
                from.counter >= range.from, from.counter < range.through,
                let head = walk(range, from: from, leaves: leaves.of(range.replica))
            else { continue }
            folds[Fold(start: from, through: range.through)] = head
            starts[range.replica] = head
        }
        return folds
    }

    /// Where `range`'s chain starts for a receiver that verified `verified`: there, or at the
    /// range's genesis when that is later (the counters between were written unsigned). The
    /// genesis's signature is `check`'s to verify.
    private static func start(of range: Range, after verified: ChainHead?) -> ChainHead? {
        guard let genesis = range.genesis?.counter, genesis <= range.through,
            verified.map({ $0.counter < genesis }) ?? true
        else { return verified }
        return ChainHead(replica: range.replica, counter: genesis, hash: ChainHead.genesis(of: range.replica).hash)
    }

    /// The head `range`'s leaves lead to from `from`; nil when the range leaves more counters
    /// without a change than anyone may claim, or carries two changes under one counter (`check`
    /// says which; `folds` runs before anything refused them).
    private func walk(
        _ range: Range,
        from: ChainHead,
        leaves carried: [(counter: UInt64, leaf: [UInt8])]
    )
        -> ChainHead?
    {
        let first = carried.partitioningIndex { $0.counter > from.counter }
        let inRange = carried[first...].prefix { $0.counter <= range.through }.count
        let span = range.through - from.counter
        guard UInt64(inRange) <= span, span - UInt64(inRange) <= Self.maxCountersWithoutChange else { return nil }
        // A counter the delta carries no change of takes the "none" leaf: if the replica made a
        // change there, the hash is not the one it signed. Walked without building a list.
        let (replica, through, hasher) = (range.replica, range.through, hasher)
        let rangeLeaves = sequence(state: (counter: from.counter, next: first)) { state -> [UInt8]? in
            guard state.counter < through else { return nil }
            state.counter += 1
            guard state.next < carried.count, carried[state.next].counter == state.counter else {
                return ChangeLeaf.none(replica: replica, counter: state.counter, hasher: hasher)
            }
            state.next += 1
            return carried[state.next - 1].leaf
        }
        return from.extended(by: rangeLeaves, hasher: hasher)
    }

    /// The same, with the leaves per replica in counter order (`Delta.changeLeaves`), and the
    /// heads some ranges lead to worked out ahead (`folds`).
    package func check(
        _ ranges: [Range],
        verified: [ReplicaID: ChainHead],
        keys: [ReplicaID: [UInt8]],
        leaves: ChangeLeaves,
        folded: [Fold: ChainHead] = [:]
    ) -> Result<[Verdict], Problem> {
        var verified = verified
        var verdicts: [Verdict] = []
        verdicts.reserveCapacity(ranges.count)
        for range in ranges {
            let replica = range.replica
            guard range.from < range.through else {
                return .failure(.emptyRange(replica, from: range.from, through: range.through))
            }
            guard let key = keys[replica] else {
                verdicts.append(.keyUnknown)
                continue
            }
            if let genesis = range.genesis {
                let head = ChainHead(
                    replica: replica,
                    counter: genesis.counter,
                    hash: ChainHead.genesis(of: replica).hash
                )
                guard head.counter <= range.through,
                    signatureIsValid(SignedHead(head: head, signature: genesis.signature), key)
                else {
                    return .failure(.badGenesis(replica, counter: head.counter))
                }
            }
            guard let from = Self.start(of: range, after: verified[replica]), from.counter >= range.from else {
                verdicts.append(.gap)
                continue
            }
            if from.counter >= range.through {
                verdicts.append(.known)
                continue
            }
            let carried = leaves.of(replica)
            let first = carried.partitioningIndex { $0.counter > from.counter }
            let inRange = carried[first...].prefix { $0.counter <= range.through }.count
            // Two changes under one counter (a preference and a stub of it, say) would be counted
            // twice below: refused before they are.
            for index in first..<(first + inRange)
            where index > first && carried[index].counter == carried[index - 1].counter {
                return .failure(.twoChangesAtOneCounter(replica, counter: carried[index].counter))
            }
            // A head worked out ahead from this very start, else the walk (which refuses a range
            // with too many counters without a change; `folds` never keeps one).
            guard
                let head = folded[Fold(start: from, through: range.through)] ?? walk(range, from: from, leaves: carried)
            else {
                return .failure(.tooManyWithoutChange(replica, count: range.through - from.counter - UInt64(inRange)))
            }
            // The signature says whether the replica signed the head its leaves lead to.
            guard signatureIsValid(SignedHead(head: head, signature: range.signature), key) else {
                return .failure(.chain(replica, .badSignature(counter: range.through)))
            }
            verified[replica] = head
            verdicts.append(.verified(head))
        }
        return .success(verdicts)
    }
}

/// The leaves of the changes a delta carries, per replica in counter order: a receiver walks
/// them along each range it checks (`ProvenanceCheck`). Two changes under one dot cannot both be
/// right; the first added is kept (the delta's check refuses such a delta anyway).
package struct ChangeLeaves: Sendable {
    private var byReplica: [ReplicaID: [(counter: UInt64, leaf: [UInt8])]] = [:]

    package init() {}

    package init(_ leaves: [Dot: [UInt8]]) {
        for (dot, leaf) in leaves { add(dot, leaf) }
        sort()
    }

    mutating func add(_ dot: Dot, _ leaf: [UInt8]) { byReplica[dot.replica, default: []].append((dot.counter, leaf)) }

    /// Adds the leaves of one replica's changes at once (a delta's entries come grouped so).
    mutating func add(_ replica: ReplicaID, _ leaves: [(counter: UInt64, leaf: [UInt8])]) {
        guard !leaves.isEmpty else { return }
        if byReplica[replica] == nil {
            byReplica[replica] = leaves
        } else {
            byReplica[replica]!.append(contentsOf: leaves)
        }
    }

    /// Puts each replica's leaves in counter order (they mostly come so: cheap then).
    mutating func sort() {
        for replica in byReplica.keys {
            byReplica[replica]!.sort { $0.counter < $1.counter }
        }
    }

    /// `replica`'s leaves in counter order.
    package func of(_ replica: ReplicaID) -> [(counter: UInt64, leaf: [UInt8])] { byReplica[replica] ?? [] }

    /// Every leaf by its change's dot (the first added where two share one).
    var byDot: [Dot: [UInt8]] {
        var leaves: [Dot: [UInt8]] = [:]
        for (replica, list) in byReplica {
            for (counter, leaf) in list where leaves[Dot(replica: replica, counter: counter)] == nil {
                leaves[Dot(replica: replica, counter: counter)] = leaf
            }
        }
        return leaves
    }
}

extension Array {
    /// The first index whose element satisfies `isAbove` (all later ones must too): a binary search.
    func partitioningIndex(where isAbove: (Element) -> Bool) -> Int {
        var (low, high) = (0, count)
        while low < high {
            let middle = (low + high) / 2
            if isAbove(self[middle]) { high = middle } else { low = middle + 1 }
        }
        return low
    }
}
