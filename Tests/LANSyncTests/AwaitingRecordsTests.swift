import LANSyncCore
import Testing

@testable import LANSync

/// The records a node keeps from ranges left out for want of a key stay bounded, oldest out first.
@Suite struct AwaitingRecordsTests {
    static func replica(_ number: Int) -> ReplicaID {
        ReplicaID(bytes: [UInt8](repeating: 0, count: 12) + withUnsafeBytes(of: UInt32(number).bigEndian, Array.init))!
    }

    @Test func aMemberMakingUpReplicasCannotGrowThemPastTheLimit() {
        var awaiting = AwaitingRecords()
        for number in 0..<(AwaitingRecords.limit + 10) { awaiting.keep("{}", of: Self.replica(number)) }
        #expect(awaiting.records.count == AwaitingRecords.limit)
        #expect(awaiting.records[Self.replica(0)] == nil, "the oldest went first")
        #expect(awaiting.records[Self.replica(AwaitingRecords.limit + 9)] != nil)
    }

    @Test func aRecordKeptAgainReplacesItsValueAndForgetGoes() {
        var awaiting = AwaitingRecords()
        awaiting.keep("a", of: Self.replica(1))
        awaiting.keep("b", of: Self.replica(1))
        awaiting.keep("c", of: Self.replica(2))
        #expect(awaiting.records == [Self.replica(1): "b", Self.replica(2): "c"])
        awaiting.forget([Self.replica(1)])
        #expect(awaiting.records == [Self.replica(2): "c"])
        for number in 3..<(AwaitingRecords.limit + 3) { awaiting.keep("x", of: Self.replica(number)) }
        #expect(awaiting.records.count == AwaitingRecords.limit)
        #expect(
            awaiting.records[Self.replica(2)] == nil,
            "a forgotten record leaves the order too: 2 was the oldest left"
        )
    }
}
