"""Localized error messages (en, pt, zh, es, ja, fr, de, id) and the language negotiation rule."""

from __future__ import annotations

import functools

from gateway.errors import ErrorCode, GatewayError

LANGUAGES = ("en", "pt", "zh", "es", "ja", "fr", "de", "id")

# One sentence per code and language. "{field}" is replaced by the offending field (or removed).
_MESSAGES: dict[str, dict[str, str]] = {
    "UNAUTHORIZED": {
        "en": "Missing or invalid credentials.",
        "pt": "Credenciais ausentes ou inválidas.",
        "zh": "缺少凭据或凭据无效。",
        "es": "Credenciales ausentes o no válidas.",
        "ja": "認証情報がないか無効です。",
        "fr": "Identifiants absents ou invalides.",
        "de": "Fehlende oder ungültige Anmeldedaten.",
        "id": "Kredensial tidak ada atau tidak valid.",
    },
    "ACCESS_DENIED": {
        "en": "Authenticated, but not allowed to do this.",
        "pt": "Autenticado, mas sem permissão para esta operação.",
        "zh": "已认证，但无权执行此操作。",
        "es": "Autenticado, pero sin permiso para esta operación.",
        "ja": "認証済みですが、この操作は許可されていません。",
        "fr": "Authentifié, mais non autorisé à effectuer cette opération.",
        "de": "Authentifiziert, aber für diese Aktion nicht berechtigt.",
        "id": "Terautentikasi, tetapi tidak diizinkan melakukan ini.",
    },
    "INVALID_INPUT": {
        "en": "Invalid input in {field}.",
        "pt": "Entrada inválida em {field}.",
        "zh": "{field} 的输入无效。",
        "es": "Entrada no válida en {field}.",
        "ja": "{field} の入力が無効です。",
        "fr": "Entrée invalide dans {field}.",
        "de": "Ungültige Eingabe in {field}.",
        "id": "Input tidak valid pada {field}.",
    },
    "DUPLICATE_RUN_ID": {
        "en": "This run was already submitted with the same runId; it is not run again.",
        "pt": "Esta execução já foi enviada com o mesmo runId; ela não é executada novamente.",
        "zh": "该运行已使用相同的 runId 提交，不会再次执行。",
        "es": "Esta ejecución ya se envió con el mismo runId; no se vuelve a ejecutar.",
        "ja": "この実行は同じ runId で送信済みです。再実行はされません。",
        "fr": "Cette exécution a déjà été soumise avec le même runId ; elle n'est pas relancée.",
        "de": "Dieser Lauf wurde bereits mit derselben runId gesendet und wird nicht erneut ausgeführt.",
        "id": "Run ini sudah dikirim dengan runId yang sama; tidak dijalankan lagi.",
    },
    "RUN_ID_CONFLICT": {
        "en": "The runId was already used in this thread by a different request; use a new runId.",
        "pt": "O runId já foi usado neste thread por outra solicitação; use um novo runId.",
        "zh": "该 runId 已被此线程中的另一个请求使用；请使用新的 runId。",
        "es": "El runId ya fue usado en este hilo por otra solicitud; use un runId nuevo.",
        "ja": "この runId はこのスレッドで別のリクエストに使用済みです。新しい runId を使ってください。",
        "fr": "Le runId a déjà été utilisé dans ce fil par une autre requête ; utilisez un nouveau runId.",
        "de": "Die runId wurde in diesem Thread bereits von einer anderen Anfrage verwendet; verwenden Sie eine neue.",
        "id": "runId sudah dipakai di thread ini oleh permintaan lain; gunakan runId baru.",
    },
    "TOO_MANY_RUNS_ON_SOCKET": {
        "en": "This connection already carries as many runs as it may; start this one when another has finished, or on another connection.",
        "pt": "Esta conexão já carrega o máximo de execuções permitido; inicie esta quando outra terminar ou em outra conexão.",
        "zh": "此连接上的运行数已达上限；请在其他运行结束后或通过另一个连接启动此运行。",
        "es": "Esta conexión ya lleva el máximo de ejecuciones permitido; inicie esta cuando otra termine o en otra conexión.",
        "ja": "この接続で実行できる数の上限に達しています。他の実行が終わってから、または別の接続で開始してください。",
        "fr": "Cette connexion porte déjà autant d'exécutions que permis ; lancez celle-ci quand une autre est terminée ou sur une autre connexion.",
        "de": "Diese Verbindung trägt bereits so viele Läufe wie erlaubt; starten Sie diesen nach dem Ende eines anderen oder über eine andere Verbindung.",
        "id": "Koneksi ini sudah membawa run sebanyak yang diizinkan; mulai run ini setelah yang lain selesai atau di koneksi lain.",
    },
    "NOT_FOUND": {
        "en": "There is nothing at this path.",
        "pt": "Não há nada neste caminho.",
        "zh": "此路径下没有内容。",
        "es": "No hay nada en esta ruta.",
        "ja": "このパスには何もありません。",
        "fr": "Il n'y a rien à ce chemin.",
        "de": "Unter diesem Pfad gibt es nichts.",
        "id": "Tidak ada apa pun di jalur ini.",
    },
    "METHOD_NOT_ALLOWED": {
        "en": "This method is not allowed on this path.",
        "pt": "Este método não é permitido neste caminho.",
        "zh": "此路径不允许使用该方法。",
        "es": "Este método no está permitido en esta ruta.",
        "ja": "このパスではこのメソッドは使用できません。",
        "fr": "Cette méthode n'est pas autorisée sur ce chemin.",
        "de": "Diese Methode ist für diesen Pfad nicht erlaubt.",
        "id": "Metode ini tidak diizinkan di jalur ini.",
    },
    "REQUEST_TIMEOUT": {
        "en": "The request arrived too slowly.",
        "pt": "A solicitação chegou lentamente demais.",
        "zh": "请求到达得太慢。",
        "es": "La solicitud llegó demasiado despacio.",
        "ja": "リクエストの到着が遅すぎます。",
        "fr": "La requête est arrivée trop lentement.",
        "de": "Die Anfrage kam zu langsam an.",
        "id": "Permintaan tiba terlalu lambat.",
    },
    "THREAD_BUSY": {
        "en": "The thread already has an active run; retry when it has finished.",
        "pt": "O thread já tem uma execução ativa; tente novamente quando ela terminar.",
        "zh": "该线程已有正在进行的运行；请在其结束后重试。",
        "es": "El hilo ya tiene una ejecución activa; reintente cuando termine.",
        "ja": "このスレッドには実行中の処理があります。終了後に再試行してください。",
        "fr": "Le fil a déjà une exécution active ; réessayez quand elle sera terminée.",
        "de": "Der Thread hat bereits einen aktiven Lauf; versuchen Sie es nach dessen Ende erneut.",
        "id": "Thread sudah memiliki run aktif; coba lagi setelah selesai.",
    },
    "THREAD_BINDING_CONFLICT": {
        "en": "The thread is bound to another {field}; it cannot move.",
        "pt": "O thread está vinculado a outro {field}; ele não pode ser movido.",
        "zh": "该线程已绑定到另一个 {field}，无法更改。",
        "es": "El hilo está vinculado a otro {field}; no puede moverse.",
        "ja": "このスレッドは別の {field} に結び付けられており、変更できません。",
        "fr": "Le fil est lié à un autre {field} ; il ne peut pas être déplacé.",
        "de": "Der Thread ist an ein anderes {field} gebunden und kann nicht wechseln.",
        "id": "Thread terikat ke {field} lain; tidak dapat dipindahkan.",
    },
    "RESUME_REQUIRED": {
        "en": "The thread is waiting for answers to its pending interrupts; send a resume.",
        "pt": "O thread aguarda respostas às interrupções pendentes; envie uma retomada.",
        "zh": "该线程正在等待待处理中断的答复；请发送 resume。",
        "es": "El hilo espera respuestas a sus interrupciones pendientes; envíe una reanudación.",
        "ja": "このスレッドは保留中の割り込みへの回答を待っています。resume を送ってください。",
        "fr": "Le fil attend des réponses à ses interruptions en attente ; envoyez une reprise.",
        "de": "Der Thread wartet auf Antworten zu offenen Unterbrechungen; senden Sie ein Resume.",
        "id": "Thread menunggu jawaban atas interupsi yang tertunda; kirim resume.",
    },
    "INCOMPLETE_RESUME": {
        "en": "Every pending interrupt must be answered exactly once ({field}).",
        "pt": "Cada interrupção pendente deve ser respondida exatamente uma vez ({field}).",
        "zh": "每个待处理中断必须且只能答复一次（{field}）。",
        "es": "Cada interrupción pendiente debe responderse exactamente una vez ({field}).",
        "ja": "保留中の割り込みにはそれぞれ一度だけ回答してください（{field}）。",
        "fr": "Chaque interruption en attente doit recevoir exactement une réponse ({field}).",
        "de": "Jede offene Unterbrechung muss genau einmal beantwortet werden ({field}).",
        "id": "Setiap interupsi tertunda harus dijawab tepat satu kali ({field}).",
    },
    "UNKNOWN_INTERRUPT": {
        "en": "The resume names an unknown interrupt ({field}).",
        "pt": "A retomada cita uma interrupção desconhecida ({field}).",
        "zh": "resume 引用了未知的中断（{field}）。",
        "es": "La reanudación nombra una interrupción desconocida ({field}).",
        "ja": "resume が不明な割り込みを指定しています（{field}）。",
        "fr": "La reprise désigne une interruption inconnue ({field}).",
        "de": "Das Resume nennt eine unbekannte Unterbrechung ({field}).",
        "id": "Resume menyebut interupsi yang tidak dikenal ({field}).",
    },
    "RESUME_PAYLOAD_INVALID": {
        "en": "The answer in {field} is missing or does not match the interrupt's schema; the interrupt is still open.",
        "pt": "A resposta em {field} está ausente ou não corresponde ao esquema; a interrupção continua aberta.",
        "zh": "{field} 中的答复缺失或不符合中断的模式；该中断仍然有效。",
        "es": "La respuesta en {field} falta o no coincide con el esquema; la interrupción sigue abierta.",
        "ja": "{field} の回答がないか、スキーマに一致しません。割り込みは開いたままです。",
        "fr": "La réponse dans {field} est absente ou ne respecte pas le schéma ; l'interruption reste ouverte.",
        "de": "Die Antwort in {field} fehlt oder passt nicht zum Schema; die Unterbrechung bleibt offen.",
        "id": "Jawaban di {field} tidak ada atau tidak sesuai skema; interupsi masih terbuka.",
    },
    "RESUME_ALREADY_APPLIED": {
        "en": "An answer to this interrupt was already applied ({field}); it is not applied again.",
        "pt": "Uma resposta a esta interrupção já foi aplicada ({field}); ela não é aplicada novamente.",
        "zh": "该中断的答复已被应用（{field}），不会再次应用。",
        "es": "Ya se aplicó una respuesta a esta interrupción ({field}); no se aplica de nuevo.",
        "ja": "この割り込みへの回答は適用済みです（{field}）。再適用はされません。",
        "fr": "Une réponse à cette interruption a déjà été appliquée ({field}) ; elle n'est pas réappliquée.",
        "de": "Eine Antwort auf diese Unterbrechung wurde bereits angewendet ({field}).",
        "id": "Jawaban untuk interupsi ini sudah diterapkan ({field}); tidak diterapkan lagi.",
    },
    "EXECUTION_EXPIRED": {
        "en": "The interrupt expired; its execution was cancelled. Start a new turn.",
        "pt": "A interrupção expirou; sua execução foi cancelada. Inicie um novo turno.",
        "zh": "该中断已过期，其执行已取消。请开始新的一轮。",
        "es": "La interrupción expiró; su ejecución se canceló. Inicie un turno nuevo.",
        "ja": "割り込みの期限が切れ、実行はキャンセルされました。新しいターンを開始してください。",
        "fr": "L'interruption a expiré ; son exécution a été annulée. Commencez un nouveau tour.",
        "de": "Die Unterbrechung ist abgelaufen; ihre Ausführung wurde abgebrochen. Starten Sie einen neuen Zug.",
        "id": "Interupsi kedaluwarsa; eksekusinya dibatalkan. Mulai giliran baru.",
    },
    "EXECUTION_LOST": {
        "en": "The execution could not be recovered ({field}).",
        "pt": "A execução não pôde ser recuperada ({field}).",
        "zh": "无法恢复该执行（{field}）。",
        "es": "No se pudo recuperar la ejecución ({field}).",
        "ja": "実行を復元できませんでした（{field}）。",
        "fr": "L'exécution n'a pas pu être récupérée ({field}).",
        "de": "Die Ausführung konnte nicht wiederhergestellt werden ({field}).",
        "id": "Eksekusi tidak dapat dipulihkan ({field}).",
    },
    "EVENTS_EXPIRED": {
        "en": "The events after this position are no longer kept; start a new run.",
        "pt": "Os eventos após esta posição já não estão guardados; inicie uma nova execução.",
        "zh": "此位置之后的事件已不再保留；请开始新的运行。",
        "es": "Los eventos posteriores a esta posición ya no se conservan; inicie una nueva ejecución.",
        "ja": "この位置以降のイベントはもう保持されていません。新しい実行を開始してください。",
        "fr": "Les événements après cette position ne sont plus conservés ; lancez une nouvelle exécution.",
        "de": "Die Ereignisse nach dieser Position werden nicht mehr aufbewahrt; starten Sie einen neuen Lauf.",
        "id": "Peristiwa setelah posisi ini tidak disimpan lagi; mulai eksekusi baru.",
    },
    "EXECUTION_NOT_FOUND": {
        "en": "No such execution for this thread and invocation.",
        "pt": "Nenhuma execução correspondente para este thread e invocação.",
        "zh": "此线程和调用下不存在该执行。",
        "es": "No existe esa ejecución para este hilo e invocación.",
        "ja": "このスレッドと呼び出しに該当する実行はありません。",
        "fr": "Aucune exécution correspondante pour ce fil et cette invocation.",
        "de": "Keine solche Ausführung für diesen Thread und diesen Aufruf.",
        "id": "Tidak ada eksekusi tersebut untuk thread dan invokasi ini.",
    },
    "STATE_PERSISTENCE_FAILED": {
        "en": "Recovery state could not be stored or read; retry later.",
        "pt": "O estado de recuperação não pôde ser gravado ou lido; tente mais tarde.",
        "zh": "无法存储或读取恢复状态；请稍后重试。",
        "es": "No se pudo guardar ni leer el estado de recuperación; reintente más tarde.",
        "ja": "復旧用の状態を保存または読み取れませんでした。後で再試行してください。",
        "fr": "L'état de reprise n'a pas pu être enregistré ou lu ; réessayez plus tard.",
        "de": "Der Wiederherstellungszustand konnte nicht gespeichert oder gelesen werden; später erneut versuchen.",
        "id": "Status pemulihan tidak dapat disimpan atau dibaca; coba lagi nanti.",
    },
    "A2A_UNAVAILABLE": {
        "en": "The agent backend is unavailable.",
        "pt": "O backend do agente está indisponível.",
        "zh": "智能体后端不可用。",
        "es": "El backend del agente no está disponible.",
        "ja": "エージェントのバックエンドを利用できません。",
        "fr": "Le backend de l'agent est indisponible.",
        "de": "Das Agenten-Backend ist nicht verfügbar.",
        "id": "Backend agen tidak tersedia.",
    },
    "SESSION_BACKUP_NOT_READY": {
        "en": "The agent's session backup is not ready yet; retry the answer shortly.",
        "pt": "O backup da sessão do agente ainda não está pronto; repita a resposta em instantes.",
        "zh": "智能体的会话备份尚未就绪；请稍后重试回答。",
        "es": "La copia de la sesión del agente aún no está lista; reintente la respuesta en breve.",
        "ja": "エージェントのセッションのバックアップがまだ準備できていません。少し待ってから回答を再送してください。",
        "fr": "La sauvegarde de session de l'agent n'est pas encore prête ; renvoyez la réponse sous peu.",
        "de": "Die Sitzungssicherung des Agenten ist noch nicht bereit; die Antwort bitte gleich erneut senden.",
        "id": "Cadangan sesi agen belum siap; kirim ulang jawaban sebentar lagi.",
    },
    "A2A_PROTOCOL_ERROR": {
        "en": "The agent backend broke the identity mapping ({field}).",
        "pt": "O backend do agente violou o mapeamento de identidades ({field}).",
        "zh": "智能体后端违反了标识映射（{field}）。",
        "es": "El backend del agente rompió el mapeo de identidades ({field}).",
        "ja": "エージェントのバックエンドが識別子の対応関係に違反しました（{field}）。",
        "fr": "Le backend de l'agent a rompu la correspondance des identités ({field}).",
        "de": "Das Agenten-Backend hat die Identitätszuordnung verletzt ({field}).",
        "id": "Backend agen melanggar pemetaan identitas ({field}).",
    },
    "A2A_EXECUTION_FAILED": {
        "en": "The agent task failed.",
        "pt": "A tarefa do agente falhou.",
        "zh": "智能体任务失败。",
        "es": "La tarea del agente falló.",
        "ja": "エージェントのタスクが失敗しました。",
        "fr": "La tâche de l'agent a échoué.",
        "de": "Die Agentenaufgabe ist fehlgeschlagen.",
        "id": "Tugas agen gagal.",
    },
    "RATE_LIMIT_EXCEEDED": {
        "en": "Too many requests; retry after the time in Retry-After.",
        "pt": "Solicitações demais; tente novamente após o tempo indicado em Retry-After.",
        "zh": "请求过多；请在 Retry-After 指示的时间后重试。",
        "es": "Demasiadas solicitudes; reintente tras el tiempo indicado en Retry-After.",
        "ja": "リクエストが多すぎます。Retry-After の時間の後に再試行してください。",
        "fr": "Trop de requêtes ; réessayez après le délai indiqué par Retry-After.",
        "de": "Zu viele Anfragen; versuchen Sie es nach der in Retry-After genannten Zeit erneut.",
        "id": "Terlalu banyak permintaan; coba lagi setelah waktu di Retry-After.",
    },
    "SERVICE_QUOTA_EXCEEDED": {
        "en": "This replica is running as many runs as it may; retry shortly.",
        "pt": "Esta réplica já executa o máximo de execuções permitido; tente novamente em breve.",
        "zh": "此副本的并发运行数已达上限；请稍后重试。",
        "es": "Esta réplica ya ejecuta el máximo de ejecuciones permitido; reintente en breve.",
        "ja": "このレプリカは同時実行数の上限に達しています。少し後に再試行してください。",
        "fr": "Cette réplique exécute déjà le maximum d'exécutions autorisé ; réessayez sous peu.",
        "de": "Diese Replik führt bereits die maximale Zahl an Läufen aus; versuchen Sie es gleich erneut.",
        "id": "Replika ini sudah menjalankan run sebanyak batasnya; coba lagi sebentar lagi.",
    },
    "SHUTTING_DOWN": {
        "en": "This replica is shutting down; retry the run (another replica can take it).",
        "pt": "Esta réplica está sendo desligada; tente a execução novamente (outra réplica pode atendê-la).",
        "zh": "此副本正在关闭；请重试该运行（其他副本可以处理）。",
        "es": "Esta réplica se está apagando; reintente la ejecución (otra réplica puede atenderla).",
        "ja": "このレプリカは停止処理中です。実行を再試行してください（別のレプリカが処理できます）。",
        "fr": "Cette réplique s'arrête ; relancez l'exécution (une autre réplique peut la prendre).",
        "de": "Diese Replik fährt herunter; wiederholen Sie den Lauf (eine andere Replik kann ihn übernehmen).",
        "id": "Replika ini sedang dimatikan; ulangi run (replika lain dapat menanganinya).",
    },
    "CANCELLED": {
        "en": "The run was cancelled.",
        "pt": "A execução foi cancelada.",
        "zh": "运行已取消。",
        "es": "La ejecución fue cancelada.",
        "ja": "実行はキャンセルされました。",
        "fr": "L'exécution a été annulée.",
        "de": "Der Lauf wurde abgebrochen.",
        "id": "Run dibatalkan.",
    },
    "INTERNAL_ERROR": {
        "en": "Internal error.",
        "pt": "Erro interno.",
        "zh": "内部错误。",
        "es": "Error interno.",
        "ja": "内部エラーです。",
        "fr": "Erreur interne.",
        "de": "Interner Fehler.",
        "id": "Kesalahan internal.",
    },
}


def _primary(tag: str) -> str:
    return tag.strip().lower().replace("_", "-").split("-", 1)[0]


_CACHED_UP_TO = 256  # the cache holds at most 512 such pairs (about 0.2 MB, whatever clients send)


def negotiate(preferred: str | None, accept_language: str | None) -> str:
    """preferredLanguage first, then Accept-Language by q-value, then English."""
    if len(preferred or "") + len(accept_language or "") <= _CACHED_UP_TO:
        return _negotiate_cached(preferred, accept_language)
    return _negotiate(preferred, accept_language)


@functools.lru_cache(maxsize=512)  # clients send a few distinct headers; parsing one cost about 2 us a request
def _negotiate_cached(preferred: str | None, accept_language: str | None) -> str:
    return _negotiate(preferred, accept_language)


def _negotiate(preferred: str | None, accept_language: str | None) -> str:
    if preferred and _primary(preferred) in LANGUAGES:
        return _primary(preferred)
    if accept_language:
        ranked: list[tuple[float, int, str]] = []
        for index, item in enumerate(accept_language.split(",")[:32]):
            tag, _, params = item.partition(";")
            q = 1.0
            for param in params.split(";"):
                key, _, value = param.strip().partition("=")
                if key == "q":
                    try:
                        q = float(value)
                    except ValueError:
                        q = 0.0
            if q > 0 and _primary(tag) in LANGUAGES:
                ranked.append((-q, index, _primary(tag)))
        if ranked:
            return min(ranked)[2]
    return "en"


def message_for(error: GatewayError, language: str) -> str:
    """The localized sentence for an error, naming its field, with the technical detail appended."""
    table = _MESSAGES[error.code.name]
    text = table.get(language) or table["en"]
    field = error.field or ""
    text = text.replace("{field}", field) if field else text.replace(" ({field})", "").replace(" {field}", "")
    if error.detail:
        text = f"{text} {error.detail}"
    return text


def known_codes() -> set[str]:
    return set(_MESSAGES) | {code.name for code in ErrorCode}
