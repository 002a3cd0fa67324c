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
    /// A delta's claim to complete `(from, through]` of a replica, with the replica's signed head at
    /// `through` and, when the range starts at or below it, the replica's latest genesis at or
    /// below `through` (the counters up to a genesis were written unsigned).
    package struct Range: Hashable, Sendable {
        package let replica: ReplicaID
        package let from: UInt64
        package let through: UInt64
        package let head: SignedHead
        package let genesis: SignedHead?

        package init(replica: ReplicaID, from: UInt64, through: UInt64, head: SignedHead, genesis: SignedHead? = nil) {
            self.replica = replica
            self.from = from
            self.through = through
            self.head = head
            self.genesis = genesis
        }
    }

    /// Why a delta is refused whole; the session logs it and ends the connection.
    package enum Problem: Error, Equatable, Sendable, CustomStringConvertible {
        /// No record names the key of the replica's device yet.
        case unknownReplica(ReplicaID)
        /// The head is not at the end of the range, or names another replica.
        case headNotAtRange(ReplicaID, counter: UInt64)
        /// The genesis is not a genesis (a hash other than zeros), is above the range's end, or its signature fails.
        case badGenesis(ReplicaID, counter: UInt64)
        /// The range failed the chain check.
        case chain(ReplicaID, ChainVerifier.Problem)

        package var description: String {
            switch self {
            case .unknownReplica(let replica): "no record names the key of replica \(replica)'s device"
            case .headNotAtRange(let replica, let counter): "replica \(replica)'s signed head at \(counter) does not end its range"
            case .badGenesis(let replica, let counter): "replica \(replica)'s genesis at \(counter) is not one it signed"
            case .chain(let replica, let problem): "replica \(replica): \(problem)"
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
    }

    let hasher: ElementHasher
    let signatureIsValid: @Sendable (SignedHead, _ key: [UInt8]) -> Bool

    package init(hasher: ElementHasher, signatureIsValid: @escaping @Sendable (SignedHead, _ key: [UInt8]) -> Bool) {
        self.hasher = hasher
        self.signatureIsValid = signatureIsValid
    }

    /// Checks every range. `verified`: each replica's verified head (a genesis counts); `keys`:
    /// each replica's signing key; `leaves`: the leaf of each change the delta carries, by dot.
    /// Ranges are checked in order, each from where the previous one left its replica, so a
    /// delta may carry one replica's chain in several ranges.
    package func check(
        _ ranges: [Range], verified: [ReplicaID: ChainHead], keys: [ReplicaID: [UInt8]], leaves: [Dot: [UInt8]]
    ) -> Result<[Verdict], Problem> {
        var verified = verified
        var verdicts: [Verdict] = []
        verdicts.reserveCapacity(ranges.count)
        for range in ranges {
            let replica = range.replica
            guard let key = keys[replica] else { return .failure(.unknownReplica(replica)) }
            guard range.head.head.replica == replica, range.head.head.counter == range.through, range.from < range.through else {
                return .failure(.headNotAtRange(replica, counter: range.head.head.counter))
            }
            var start = verified[replica]
            if let genesis = range.genesis {
                let head = genesis.head
                guard head.replica == replica, head.hash == ChainHead.genesis(of: replica).hash, head.counter <= range.through,
                    signatureIsValid(genesis, key)
                else { return .failure(.badGenesis(replica, counter: head.counter)) }
                // A later genesis than the start: what lies between was written unsigned.
                if start.map({ $0.counter < head.counter }) ?? true { start = head }
            }
            guard let from = start, from.counter >= range.from else {
                verdicts.append(.gap)
                continue
            }
            if from.counter >= range.through {
                verdicts.append(.known)
                continue
            }
            var rangeLeaves: [[UInt8]] = []
            rangeLeaves.reserveCapacity(Int(range.through - from.counter))
            // A counter the delta carries no change of takes the "none" leaf: if the replica made
            // a change there, the hash is not the one it signed.
            for counter in (from.counter + 1)...range.through {
                rangeLeaves.append(leaves[Dot(replica: replica, counter: counter)] ?? ChangeLeaf.none(replica: replica, counter: counter, hasher: hasher))
            }
            let verifier = ChainVerifier(hasher: hasher) { [signatureIsValid] in signatureIsValid($0, key) }
            switch verifier.verify(from: from, leaves: rangeLeaves, to: range.head) {
            case .success(let head):
                verified[replica] = head
                verdicts.append(.verified(head))
            case .failure(let problem):
                return .failure(.chain(replica, problem))
            }
        }
        return .success(verdicts)
    }
}
