"""memstore as the session store of agent frameworks, one module per framework, each an optional
extra that `import memstore` never loads:

- `memstore.integrations.openai_agents`: `MemstoreSession`, an OpenAI Agents SDK `Session`;
- `memstore.integrations.openai_advanced`: `MemstoreAdvancedSession`, the SDK's
  `AdvancedSQLiteSession` (branches, usage per turn) on any memstore store;
- `memstore.integrations.langchain`: `MemstoreChatMessageHistory`, a LangChain
  `BaseChatMessageHistory`;
- `memstore.integrations.google_adk`: `MemstoreSessionService`, a Google ADK
  `BaseSessionService`.
"""
