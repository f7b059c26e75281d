"""Adapters that put the guard inside agent frameworks, each behind its extra.

=====================================  ==========================  ==============================
module                                 extra                       what it plugs into
=====================================  ==========================  ==============================
``antiloop.integrations.langchain``    ``antiloop[langchain]``     LangChain v1 ``AgentMiddleware``
``antiloop.integrations.openai_agents``  ``antiloop[openai-agents]``  tool guardrails + ``RunHooks``
``antiloop.integrations.autogen``      ``antiloop[autogen]``       a ``TerminationCondition``, tools
``antiloop.integrations.crewai``       ``antiloop[crewai]``        tool-call and model-call hooks
``antiloop.integrations.mcp_proxy``    (none: standard library)    ``antiloop mcp-proxy``
``antiloop.integrations.claude_agent_sdk``  ``[claude-agent-sdk]``  ``HookMatcher`` callbacks
``antiloop.integrations.pydantic_ai``  ``antiloop[pydantic-ai]``   a capability (tool hooks)
``antiloop.integrations.google_adk``   ``antiloop[google-adk]``    tool and model callbacks
``antiloop.integrations.litellm``      ``antiloop[litellm]``       a LiteLLM proxy guardrail
=====================================  ==========================  ==============================

Importing a module whose framework is missing raises ``MissingExtra`` with the pip command.
"""
