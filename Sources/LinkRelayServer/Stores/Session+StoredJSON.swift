import Foundation
import LinkRelayCore
import LinkRelaySupport

// Hand-written JSON for the store, the channels and webhooks (see `JSONObjectWriter`). The `Codable`
// forms stay the reference: tests check that both decode to the same values.

extension Session {
    /// The stored form: `Codable`'s keys, dates as seconds since 2001.
    var storedJSON: [UInt8] {
        // Room for the whole object, so that it is written without growing: about 700 bytes, and
        // about 350 more with a result.
        var json = JSONObjectWriter(capacity: result == nil ? 768 : 1280)
        json.add("id", id)
        json.add("linkKey", linkKey)
        json.add("channelToken", channelToken)
        json.add("state", state.rawValue)
        json.add("createdAt", secondsSinceReferenceDate: createdAt)
        json.add("expiresAt", secondsSinceReferenceDate: expiresAt)
        json.add("tappedAt", secondsSinceReferenceDate: tappedAt)
        json.add("version", version)
        json.add("lastSeq", lastSeq)
        json.add("correlationId", correlationId)
        json.add("authToken", authToken)
        json.add("clientRequestId", clientRequestId)
        json.add("phoneNumber", phoneNumber)
        json.add("finalTargetUrl", finalTargetUrl)
        json.add("desktopIPAddress", desktopIPAddress)
        json.add("idempotencyKey", idempotencyKey)
        json.add("requestFingerprint", requestFingerprint)
        json.add("seenAuthIds", seenAuthIds)
        json.add("verificationPending", verificationPending)
        json.add("result", object: result?.storedJSON)
        json.add("possessionType", possessionType?.rawValue)
        json.add("tenant", tenant)
        json.add("endedAt", secondsSinceReferenceDate: endedAt)
        // Pre-Fill only, and rare: `Codable` writes it.
        json.add("prefill", object: prefill.flatMap { try? JSONEncoder().encode($0) }.map(Array.init))
        if let nevis {
            var object = JSONObjectWriter(capacity: 256 + (nevis.qrCode?.utf8.count ?? 0))
            object.add("appLink", nevis.appLink)
            object.add("channel", nevis.channel)
            object.add("dispatchFailure", nevis.dispatchFailure)
            object.add("handle", nevis.handle)
            object.add("qrCode", nevis.qrCode)
            object.add("transactionId", nevis.transactionId)
            object.add("userId", nevis.userId)
            object.add("username", nevis.username)
            json.add("nevis", object: object.finish())
        }
        return json.finish()
    }
}

extension SessionResult {
    private static func evaluationJSON(_ evaluation: [String: Evaluation]) -> [UInt8] {
        var object = JSONObjectWriter()
        for (name, value) in evaluation.sorted(by: { $0.key < $1.key }) {
            var entry = JSONObjectWriter(capacity: 64)
            entry.add("failureReasons", value.failureReasons)
            entry.add("result", value.result)
            object.add(name, object: entry.finish())
        }
        return object.finish()
    }

    /// The stored form: dates as seconds since 2001, as `Codable` writes them.
    var storedJSON: [UInt8] { json(isoDates: false) }

    /// The API's form, as `RelayJSON` writes it: dates in ISO 8601. A webhook body carries it, made on
    /// the event loop that verified the session.
    var apiJSON: [UInt8] { json(isoDates: true) }

    /// Keys sorted, as the API's form needs them; the stored form takes them so too.
    private func json(isoDates: Bool) -> [UInt8] {
        var json = JSONObjectWriter(capacity: 512)
        if let binding {
            var object = JSONObjectWriter(capacity: 256)
            if isoDates {
                object.add("at", iso8601: binding.at)
            } else {
                object.add("at", secondsSinceReferenceDate: binding.at)
            }
            object.add("deviceId", binding.deviceId)
            if let evaluation = binding.evaluation { object.add("evaluation", object: Self.evaluationJSON(evaluation)) }
            object.add("phoneNumber", binding.phoneNumber)
            object.add("success", binding.success)
            json.add("binding", object: object.finish())
        }
        json.add("clientHumanId", clientHumanId)
        json.add("clientRequestId", clientRequestId)
        json.add("deviceId", deviceId)
        if let evaluation { json.add("evaluation", object: Self.evaluationJSON(evaluation)) }
        if let nevis {
            var object = JSONObjectWriter(capacity: 160)
            object.add("status", nevis.status)
            object.add("transactionId", nevis.transactionId)
            object.add("userId", nevis.userId)
            object.add("username", nevis.username)
            json.add("nevis", object: object.finish())
        }
        json.add("outcome", outcome.rawValue)
        json.add("phoneNumber", phoneNumber)
        json.add("proveId", proveId)
        json.add("proveSuccess", proveSuccess)
        json.add("reason", reason)
        json.add("success", success)
        return json.finish()
    }
}

extension SessionEvent {
    /// The stored form: dates as seconds since 2001.
    var storedJSON: [UInt8] {
        var json = JSONObjectWriter(capacity: 96)
        json.add("seq", seq)
        json.add("type", kind.type)
        json.add("at", secondsSinceReferenceDate: at)
        switch kind {
        case .waiting(let expiresAt): json.add("expiresAt", secondsSinceReferenceDate: expiresAt)
        case .tapped(let asc): json.add("asc", asc)
        case .result(let outcome): json.add("outcome", outcome.rawValue)
        case .cancelled(let reason): json.add("reason", reason.rawValue)
        case .expired: break
        }
        return json.finish()
    }
}
